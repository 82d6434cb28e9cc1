"""Which units of the jax tree (``farm.cache.units``) each harness runs, recorded in a worker.

A worker loads jax through an import hook (``Recorder.install``, before jax is
imported) that instruments every unit: each function body (nested ones included)
starts by marking the unit in a bytearray of its module, and so does every lambda
and generator expression in it (about 30 ns a call, on any thread, host callbacks
included; a profiler cost +12% on the cold sweep). The instrumented code is cached by
the file's path and content beside the digest memos, never in ``__pycache__``. Plus the
worker process's *global set*: the units run while it imported jax and the catalog
and ran one harness with its function replaced by the identity, and in any harness
that imported a jax module, registered a rule or made a backend (lazy set-up whose
effect later harnesses use without running it). The worker's set-up so covers the
machinery every harness uses (backends, each platform's lowering, export, compile,
the catalog's argument makers), not whichever harness comes first.

``wire`` is what an outcome carries to the store: its set's address and the bodies of
the parts the store does not hold yet.

No database, Ray or jax imports at import time: the hook must be in place before jax is.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.abc
import importlib.machinery
import marshal
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from farm.cache.filedigests import atomic_write
from farm.cache.units import unit_defs, address

#: The name each instrumented module holds its hit marks under.
SEEN = "__farm_seen__"


def _mark(i: int) -> ast.expr:
    """``__farm_seen__.__setitem__(i, 1)``: an expression (it returns None) for lambdas and generators."""
    return ast.Call(ast.Attribute(ast.Name(SEEN, ast.Load()), "__setitem__", ast.Load()),
                    [ast.Constant(i), ast.Constant(1)], [])


class _Marker(ast.NodeTransformer):
    """Marks unit ``i`` as run wherever code of its body can run later on its own: the
    body of every function defined in it, and every lambda and generator expression."""

    def __init__(self, i: int) -> None:
        self.i = i

    def _body(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        first = node.body[0]
        at = 1 if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str) else 0  # after the docstring: it stays one
        anchor = node.body[at] if at < len(node.body) else first
        stmt = ast.Assign([ast.Subscript(ast.Name(SEEN, ast.Load()), ast.Constant(self.i), ast.Store())],
                          ast.Constant(1))
        node.body.insert(at, ast.copy_location(stmt, anchor))  # on the line of the first statement
        return node

    visit_FunctionDef = _body
    visit_AsyncFunctionDef = _body

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.generic_visit(node)
        node.body = ast.copy_location(ast.BoolOp(ast.Or(), [_mark(self.i), node.body]), node.body)
        return node

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:
        self.generic_visit(node)
        node.elt = ast.copy_location(ast.BoolOp(ast.Or(), [_mark(self.i), node.elt]), node.elt)
        return node


def instrument(source: bytes, path: str) -> tuple[list[str], Any]:
    """(unit names, code) of a module whose every unit marks ``__farm_seen__[its index]``
    when any of its code runs (the module's globals must hold that bytearray)."""
    tree = ast.parse(source, path)
    units = unit_defs(tree)
    names = sorted({n for n, _ in units})
    index = {n: i for i, n in enumerate(names)}
    for name, node in units:
        _Marker(index[name]).visit(node)
    ast.fix_missing_locations(tree)
    return names, compile(tree, path, "exec", dont_inherit=True)


def _instrumented_code(path: str, data: bytes, cache_dir: Path | None) -> tuple[list[str], Any]:
    """``instrument``, cached in ``cache_dir`` by the file's path and content (a code object
    names its file: tracebacks, linecache, the harness digest's source lines; so a copy of
    jax elsewhere, an overlay, has code of its own), never in ``__pycache__``: other
    processes load the plain code."""
    sha = hashlib.sha256(path.encode() + b"\0" + data).hexdigest()
    cache = cache_dir / f"{sha}.bin" if cache_dir else None
    if cache is not None:
        try:
            names, code = marshal.loads(cache.read_bytes())
            return list(names), code
        except (OSError, ValueError, EOFError, TypeError):
            pass
    names, code = instrument(data, path)
    if cache is not None:
        try:
            atomic_write(cache, marshal.dumps((names, code)))
        except OSError:
            pass  # a read-only cache: instrumenting again next time is only slower
    return names, code


class _Finder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: asks the finders behind it for a module of the package,
    as the import system would (so a ``sitecustomize`` hook or an overlay still decides
    what is loaded and may wrap its loader), then has that loader's ``get_code`` return
    the instrumented code of the file it found."""

    def __init__(self, package: str, root: str, recorder: "Recorder") -> None:
        self.package, self.prefix, self.recorder = package, root + os.sep, recorder

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.package and not fullname.startswith(self.package + "."):
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        origin = getattr(spec, "origin", None)
        if isinstance(loader, importlib.machinery.SourceFileLoader) and isinstance(origin, str) \
                and origin.endswith(".py") and os.path.realpath(origin).startswith(self.prefix):
            self._instrument(loader, origin)
        return spec

    def _instrument(self, loader: importlib.machinery.SourceFileLoader, origin: str) -> None:
        recorder = self.recorder

        def get_code(fullname: str) -> Any:
            names, code = _instrumented_code(loader.path, loader.get_data(loader.path), recorder.code_cache)
            seen = bytearray(len(names))
            setattr(sys.modules[fullname], SEEN, seen)  # the module is registered before its code runs
            recorder.modules.append((os.path.relpath(os.path.realpath(origin), recorder.root or ""), names, seen))
            return code

        loader.get_code = get_code  # type: ignore[method-assign]


class Recorder:
    """What of the jax tree this worker process runs, harness by harness.

    ``install`` puts an import hook in place before jax is imported: every module of the
    jax tree is then loaded with each unit marking a bytearray when its code runs (one
    store per call, on any thread: about 30 ns, against 200-300 ns for a profiler event).
    A harness's units are the marks set between ``begin`` and ``end``. A process where jax
    was imported first records nothing, and no harness of it gets a deps key."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.modules: list[tuple[str, list[str], bytearray]] = []  # (file, unit names, marks)
        self.code_cache: Path | None = None
        self.global_units: dict[str, set[str]] = {}
        self.global_part: tuple[str, dict[str, Any]] | None = None
        self.sent: set[str] = set()  # part addresses this process has sent (the store keeps them)
        self._state: tuple[int, ...] = ()
        self._recording = False
        self._parts: dict[tuple[str, frozenset[str]], tuple[str, dict[str, Any]]] = {}
        self._finder: _Finder | None = None
        self.enabled = False
        self.why_not = "its set-up was not watched"

    def install(self, root: str, package: str = "jax", code_cache: Path | None = None) -> bool:
        """Load ``package`` (whose directory is ``root``) instrumented from now on; False
        (and ``why_not``) where it is imported already."""
        if package in sys.modules:
            self.why_not = f"{package} was imported before the worker started watching"
            return False
        self.root = os.path.realpath(root)
        self.code_cache = code_cache
        self._finder = _Finder(package, self.root, self)
        sys.meta_path.insert(0, self._finder)
        return True

    @property
    def watching(self) -> bool:
        """Whether the import hook is in place (``install`` succeeded)."""
        return self._finder is not None

    def end_setup(self, keyed_root: str | None = None) -> None:
        """After the imports of jax and the catalog (and a warm-up): what ran so far is the
        process's global set. ``keyed_root``: the directory the keys are computed over
        (``farm.cache.key.jax_tree``), which must be the one recorded."""
        if self._finder is None:
            return
        jax = sys.modules.get(self._finder.package)
        here = os.path.realpath(getattr(jax, "__file__", None) or "")
        if not here.startswith(self._finder.prefix) or not self.modules:
            # something else decided where jax came from: the tree keys would describe other code
            self.why_not = f"{self._finder.package} was loaded from {here or 'nowhere'}, not {self.root}"
            return
        if keyed_root is not None and keyed_root != self.root:
            self.why_not = f"the keys would be computed over {keyed_root}, not {self.root}"
            return
        self._merge_global(self._collect())
        self._state = _global_state()
        self.enabled, self.why_not = True, ""

    def _collect(self) -> dict[str, set[str]]:
        """file -> units marked since the marks were last cleared."""
        out: dict[str, set[str]] = {}
        for rel, names, seen in self.modules:
            i = seen.find(1)
            while i >= 0:
                out.setdefault(rel, set()).add(names[i])
                i = seen.find(1, i + 1)
        return out

    def _clear(self) -> None:
        for _, _, seen in self.modules:
            if seen.find(1) >= 0:
                seen[:] = bytes(len(seen))

    def _merge_global(self, units: Mapping[str, set[str]]) -> None:
        for rel, names in units.items():
            self.global_units.setdefault(rel, set()).update(names)
        part = {"units": {rel: sorted(n) for rel, n in sorted(self.global_units.items())}}
        self.global_part = (address(part), part)

    def begin(self) -> bool:
        """Start recording one harness; False: this process records nothing."""
        if not self.enabled:
            return False
        jax = sys.modules.get("jax")
        if jax is not None:
            # what jax cached for an earlier harness (an inner jit's trace and lowering, a
            # compiled executable) would let this one skip code it depends on, unseen
            jax.clear_caches()
        self._clear()
        self._recording = True
        return True

    def end(self) -> dict[str, Any] | None:
        """Stop recording: ``{"set": address, "parts": {address: part}, "new": [address]}``
        of this harness, where the global set is one part and each file's units another;
        ``new``: the parts this process has not sent before (the store keeps the others)."""
        if not self._recording:
            return None
        self._recording = False
        units = self._collect()
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
