"""Which of jax's code each harness ran: a per-harness key on the jax tree, so that one
edited lowering rule re-runs the harnesses that ran it and not the whole catalog.

This is ccache's "direct mode" (a manifest of the headers a compile read, re-hashed on
the next lookup) with Python functions for headers:

- **Units.** Every ``.py`` file of the jax tree is cut into *units*, one per function
  defined at module or class level (``_sin_lowering``, ``Primitive.bind``), each hashed
  by its whole AST (nested functions, lambdas and comprehensions included, line numbers
  not), and a *skeleton*: the file with those bodies taken out (imports, module-level
  statements, class bodies, decorators, default values, registrations such as
  ``mlir.register_lowering(sin_p, _sin_lowering)``).
- **The global part** of every key: the skeleton of every file of the tree (a file
  added or removed, any module-level edit changes every key), the whole content of its
  other files, and every unit whose result a cache can keep between harnesses (a
  decorator or wrapper naming ``cache``/``memo``): a later harness can use such a
  result without running the unit, so the unit cannot be attributed to it.
- **A harness's own part**: the units the worker saw run while it ran the harness
  (``cProfile`` without sub-call or C-call accounting: about +20% on the Python side of
  a harness, measured), plus the worker process's *global set*: the units run while it
  imported jax and the catalog, in its first harness (backend and plugin set-up) and in
  any harness that imported a jax module, registered a rule or made a backend (lazy
  set-up whose effect later harnesses use without running it). The worker's set-up
  includes one harness run with its function replaced by the identity, so that the
  machinery every harness uses (backends, lowering for each platform, export, compile,
  the catalog's argument makers) is set up there, not in whichever harness comes first. A whole file is taken where its code runs
  on XLA's threads (host callbacks), which the profiler does not see.

A cached outcome is reused by this key only if every unit it ran hashes the same now
(``farm.pipeline.cachekey.deps_key``): an edited unit, a removed one, an edited
skeleton or cached unit anywhere, all miss. What is not seen: state a harness leaves
behind for later harnesses outside imports, rule registries and decorated caches (a
hand-made module-level memo dict filled lazily), and Python code run on threads other
than the harness's outside the files named in ``WHOLE_FILES``.

No database, Ray or jax imports: the driver computes keys with it too.
"""
from __future__ import annotations

import ast
import cProfile
import hashlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Bump when the meaning of a unit or skeleton digest changes.
UNITS_VERSION = "1"
#: Files whose code runs on XLA's own threads (host callbacks): taken whole when touched.
WHOLE_FILES = ("_src/callback.py", "_src/debugging.py")
#: A decorator or wrapper whose name holds one of these keeps results between harnesses.
CACHE_WORDS = ("cache", "memo")


# ------------------------------------------------------------------ units of a file
@dataclass(frozen=True, slots=True)
class FileUnits:
    """The digests of one ``.py`` file: its skeleton, each unit, and the units a cache wraps."""

    skeleton: str
    units: Mapping[str, str]
    cached: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"skeleton": self.skeleton, "units": dict(self.units), "cached": list(self.cached)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileUnits":
        return cls(d["skeleton"], d["units"], tuple(d["cached"]))


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _mentions_cache(node: ast.AST) -> bool:
    text = ast.dump(node).lower()
    return any(w in text for w in CACHE_WORDS)


def parse_units(source: str | bytes) -> FileUnits:
    """Cut a module's source into units and skeleton (see the module docstring). A file
    that does not parse is one skeleton (its whole text)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        text = source.decode(errors="replace") if isinstance(source, bytes) else source
        return FileUnits(_h("unparsed\0" + text), {}, ())
    parts: dict[str, list[str]] = {}
    cached: set[str] = set()

    def strip(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + node.name
                parts.setdefault(name, []).append(ast.dump(node))
                if any(_mentions_cache(d) for d in node.decorator_list):
                    cached.add(name)
                node.body = [ast.Pass()]  # the signature, decorators and defaults stay in the skeleton
            elif isinstance(node, ast.ClassDef):
                strip(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                # conditional definitions (``if TYPE_CHECKING:``, ``try: ... except ImportError:``)
                for field in ("body", "orelse", "finalbody"):
                    strip(getattr(node, field, []) or [], prefix)
                for handler in getattr(node, "handlers", []) or []:
                    strip(handler.body, prefix)

    strip(tree.body, "")
    # a unit wrapped by a cache in a module-level statement (``f = lru_cache(f)``, ``cache()(f)``)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _mentions_cache(node.func):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in parts:
                    cached.add(arg.id)
    units = {name: _h("\0".join(dumps)) for name, dumps in parts.items()}
    return FileUnits(_h(ast.dump(tree)), units, tuple(sorted(cached)))


class UnitDigests:
    """``parse_units`` per file, memoized by the file's content sha256 in memory and on
    disk (beside the file-digest memo), so an unchanged tree is parsed once per host."""

    def __init__(self, sha: Any, path: Path | None = None) -> None:
        self._sha = sha  # path -> content sha256 (memoized by stat: ``cachekey.FILES.sha``)
        self.path = path or Path(os.environ.get("FARM_UNIT_CACHE") or
                                 Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                 / "lowering-farm" / f"unit-digests-{UNITS_VERSION}.json")
        self._memo: dict[str, dict[str, Any]] | None = None
        self._parsed: dict[str, FileUnits] = {}
        self._dirty = False
        self._lock = threading.Lock()
        self.parsed_files = 0

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._memo is None:
            try:
                self._memo = json.loads(self.path.read_text())
            except (OSError, ValueError):
                self._memo = {}
        return self._memo

    def of(self, path: str) -> FileUnits:
        sha = self._sha(path)
        got = self._parsed.get(sha)
        if got is not None:
            return got
        memo = self._load()
        d = memo.get(sha)
        if d is not None:
            got = FileUnits.from_json(d)
        else:
            with open(path, "rb") as f:
                got = parse_units(f.read())
            self.parsed_files += 1
            with self._lock:
                memo[sha] = got.to_json()
                self._dirty = True
        self._parsed[sha] = got
        return got

    def save(self) -> None:
        if not self._dirty or self._memo is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".unit-digests.")
            with os.fdopen(fd, "w") as f:
                json.dump(self._memo, f)
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError:
            pass  # a read-only home: the memo is only a speed-up


# ------------------------------------------------------------------ the tree
class Tree:
    """The jax tree as units: its global digest, and the digest of any recorded part now."""

    def __init__(self, root: str, units: UnitDigests, sha: Any) -> None:
        self.root = os.path.realpath(root)
        self._units, self._sha = units, sha
        self._global: str | None = None
        self._parts: dict[str, str] = {}

    def files(self) -> list[str]:
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            out += [os.path.relpath(os.path.join(dirpath, n), self.root) for n in filenames
                    if not n.endswith((".pyc", ".pyo"))]
        return sorted(out)

    def unit(self, rel: str) -> FileUnits | None:
        p = os.path.join(self.root, rel)
        return self._units.of(p) if rel.endswith(".py") and os.path.isfile(p) else None

    @property
    def digest(self) -> str:
        """Every skeleton, every cached unit, every other file's content."""
        if self._global is None:
            h = hashlib.sha256(f"jaxdeps {UNITS_VERSION}\0".encode())
            for rel in self.files():
                p = os.path.join(self.root, rel)
                if rel.endswith(".py"):
                    u = self._units.of(p)
                    h.update(f"{rel}\0{u.skeleton}\0{[(c, u.units[c]) for c in u.cached]}\n".encode())
                else:
                    try:
                        h.update(f"{rel}\0{self._sha(p)}\n".encode())
                    except OSError:
                        continue  # a dangling link
            self._units.save()
            self._global = h.hexdigest()
        return self._global

    def part_digest(self, sha: str, part: Mapping[str, Any]) -> str:
        """A recorded part's digest over the units as they are now (memoized by the part's
        address); a file or unit that is gone hashes as absent, so the key changes."""
        got = self._parts.get(sha)
        if got is None:
            rows = []
            for rel, names in sorted(part["units"].items()):
                fu = self.unit(rel)
                rows.append((rel, [(n, fu.units.get(n, "absent") if fu else "absent") for n in names]))
            got = _h(json.dumps(rows))
            self._parts[sha] = got
        return got

    def deps_digest(self, parts: Mapping[str, Mapping[str, Any]]) -> str:
        """The digest of a harness's recorded parts (address -> part) over today's tree."""
        return _h(json.dumps(sorted(self.part_digest(s, p) for s, p in parts.items())))


def address(obj: Any) -> str:
    """Content address of a part or a set (its canonical JSON)."""
    return hashlib.sha256(canonical(obj)).hexdigest()


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


# ------------------------------------------------------------------ recording in a worker
class Recorder:
    """What of the jax tree this worker process runs, harness by harness.

    Only a process whose set-up was watched from before jax was imported records
    (``end_setup``); any other gives no harness a deps key."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.tree: Tree | None = None
        self.global_units: dict[str, set[str]] = {}
        self.global_part: tuple[str, dict[str, Any]] | None = None
        self.windows = 0
        self.sent: set[str] = set()  # part addresses this process has sent (the store keeps them)
        self._profile: cProfile.Profile | None = None
        self._state: tuple[int, ...] = ()
        self._prefix = ""
        self._place: dict[int, tuple[Any, tuple[str, str] | None]] = {}
        self._files: dict[str, FileUnits | None] = {}
        self._parts: dict[tuple[str, frozenset[str]], tuple[str, dict[str, Any]]] = {}
        self.enabled = False
        self.why_not = "its set-up was not watched"

    def end_setup(self, setup: cProfile.Profile | str) -> None:
        """After the imports of jax and the catalog: the units ``setup`` (a profiler started
        before jax was imported, or why there is none) saw run are the process's global set."""
        if isinstance(setup, str):
            self.why_not = setup
            return
        setup.disable()
        from farm.pipeline import cachekey

        roots = cachekey.jax_roots()
        if len(roots) != 1:
            self.why_not = f"jax has {len(roots)} package directories"
            return
        tree = cachekey.jax_tree()
        assert tree is not None
        self.attach(tree)
        self._merge_global(self._units(setup))
        self._state = _global_state()
        self.enabled, self.why_not = True, ""

    def attach(self, tree: Tree) -> None:
        """Record the code of ``tree`` (the jax package directory)."""
        self.root, self._prefix, self.tree = tree.root, tree.root + os.sep, tree

    def _units(self, profile: cProfile.Profile) -> dict[str, set[str]]:
        """file (relative to the jax root) -> units whose code ran. Each code object is
        placed once per process (in the units of its file as this process first read it:
        the code it runs is what it imported, whatever the file says later)."""
        assert self.tree is not None and self.root is not None
        out: dict[str, set[str]] = {}
        place = self._place
        for e in profile.getstats():
            code = e.code
            got = place.get(id(code))
            if got is None or got[0] is not code:  # by identity: hashing a code object hashes its bytecode
                got = place[id(code)] = (code, self._locate(code))  # (held, so that its id is never reused)
            where = got[1]
            if where is not None:
                out.setdefault(where[0], set()).add(where[1])
        for rel in list(out):
            if rel.endswith(WHOLE_FILES):
                out[rel] = set(self._file(rel).units)  # type: ignore[union-attr]
        return out

    def _locate(self, code: Any) -> tuple[str, str] | None:
        """(file, unit) of a code object of the jax tree; None: another file's, C code, or the
        skeleton's (module and class bodies, module-level lambdas and comprehensions)."""
        if isinstance(code, str) or not code.co_filename.startswith(self._prefix):
            return None
        rel = code.co_filename[len(self._prefix):]
        fu = self._file(rel)
        name = code.co_qualname.split(".<locals>", 1)[0]
        return (rel, name) if fu is not None and name in fu.units else None

    def _file(self, rel: str) -> FileUnits | None:
        if rel not in self._files:
            assert self.tree is not None
            self._files[rel] = self.tree.unit(rel)
        return self._files[rel]

    def _merge_global(self, units: Mapping[str, set[str]]) -> None:
        for rel, names in units.items():
            self.global_units.setdefault(rel, set()).update(names)
        part = {"units": {rel: sorted(n) for rel, n in sorted(self.global_units.items())}}
        self.global_part = (address(part), part)

    def begin(self) -> bool:
        """Start recording one harness; False: this process records nothing."""
        if not self.enabled or sys.getprofile() is not None:
            return False
        self._profile = cProfile.Profile(subcalls=False, builtins=False)
        self._profile.enable()
        return True

    def end(self) -> dict[str, Any] | None:
        """Stop recording: ``{"set": address, "parts": {address: part}, "new": [address]}``
        of this harness, where the global set is one part and each file's units another;
        ``new``: the parts this process has not sent before (the store keeps the others)."""
        prof, self._profile = self._profile, None
        if prof is None:
            return None
        prof.disable()
        units = self._units(prof)
        self.windows += 1
        state = _global_state()
        if state != self._state:
            self._merge_global(units)  # set-up that later harnesses rely on without running it
            self._state = state
            units = {}
        assert self.global_part is not None
        parts = dict([self.global_part])
        for rel, names in units.items():
            key = (rel, frozenset(names))
            got = self._parts.get(key)
            if got is None:  # the same file's same units recur harness after harness: address them once
                part = {"units": {rel: sorted(names)}}
                got = self._parts[key] = (address(part), part)
            parts[got[0]] = got[1]
        new = [a for a in parts if a not in self.sent]
        self.sent.update(new)
        return {"set": address({"parts": sorted(parts)}), "parts": parts, "new": new}


def _global_state() -> tuple[int, ...]:
    """Sizes of what set-up fills: jax's loaded modules, its rule registries and backends."""
    global _MODULES
    if len(sys.modules) != _MODULES[0]:  # counting jax's modules costs a walk: only when any came or went
        _MODULES = (len(sys.modules), sum(1 for name in list(sys.modules) if name.startswith("jax")))
    sizes = [_MODULES[1]]
    mlir = sys.modules.get("jax._src.interpreters.mlir")
    ad = sys.modules.get("jax._src.interpreters.ad")
    batching = sys.modules.get("jax._src.interpreters.batching")
    bridge = sys.modules.get("jax._src.xla_bridge")
    for mod, name in ((mlir, "_lowerings"), (bridge, "_backends"), (ad, "primitive_jvps"),
                      (ad, "primitive_transposes"), (batching, "primitive_batchers")):
        reg = getattr(mod, name, None) if mod is not None else None
        sizes.append(len(reg) if isinstance(reg, dict) else -1)
    per_platform = getattr(mlir, "_platform_specific_lowerings", None) if mlir is not None else None
    if isinstance(per_platform, dict):
        sizes += [len(per_platform), *(len(v) for v in per_platform.values() if isinstance(v, dict))]
    return tuple(sizes)


_MODULES = (-1, 0)


RECORDER = Recorder()


def wire(deps: Mapping[str, Any]) -> dict[str, Any]:
    """What an outcome carries to the store: its set and the bodies of its new parts."""
    return {"set": deps["set"], "rows": {deps["set"]: {"parts": sorted(deps["parts"])},
                                         **{a: deps["parts"][a] for a in deps["new"]}}}
