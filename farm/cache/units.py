"""Which of jax's code each harness ran: a per-harness key on the jax tree, so that one
edited lowering rule re-runs the harnesses that ran it and not the whole catalog.

This is ccache's "direct mode" (a manifest of the headers a compile read, re-hashed on
the next lookup) with Python functions for headers. This module cuts the tree and
hashes it; ``farm.cache.recorder`` records which units a harness ran:

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
- **A harness's own part**: the units that ran while the worker ran the harness
  (``farm.cache.recorder``), plus the worker process's *global set*.

A part and a set are content-addressed (``address``: the sha256 of their ``canonical``
JSON), which is how the store keeps them (``farm.store.codedeps``).

A cached outcome is reused by this key only if every unit it ran hashes the same now
(``farm.cache.key.deps_key``): an edited unit, a removed one, an edited
skeleton or cached unit anywhere, all miss. What is not seen: state a harness leaves
behind for later harnesses outside imports, rule registries, backends and decorated
caches (a hand-made module-level memo dict filled lazily), and code of the jax tree not
loaded through the hook (``exec`` of generated source).

No database, Ray or jax imports: the driver computes keys with it too.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.cache.filedigests import JsonMemo, walk_files

#: Bump when the meaning of a unit or skeleton digest changes.
UNITS_VERSION = "1"
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


def unit_defs(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(unit name, def) of every module- or class-level function, as ``parse_units`` names them."""
    out: list[tuple[str, ast.AST]] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(node, field, []) or [], prefix)
                for handler in getattr(node, "handlers", []) or []:
                    walk(handler.body, prefix)

    walk(tree.body, "")
    return out


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
    for name, node in unit_defs(tree):  # the instrumenter names units with the same walk
        parts.setdefault(name, []).append(ast.dump(node))
        if any(_mentions_cache(d) for d in node.decorator_list):  # type: ignore[attr-defined]
            cached.add(name)
        node.body = [ast.Pass()]  # type: ignore[attr-defined]  # signature, decorators, defaults stay

    # a unit wrapped by a cache in a module-level statement (``f = lru_cache(f)``, ``cache()(f)``)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _mentions_cache(node.func):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in parts:
                    cached.add(arg.id)
    units = {name: _h("\0".join(dumps)) for name, dumps in parts.items()}
    return FileUnits(_h(ast.dump(tree)), units, tuple(sorted(cached)))


class UnitDigests(JsonMemo):
    """``parse_units`` per file, memoized by the file's content sha256 in memory and on
    disk (beside the file-digest memo), so an unchanged tree is parsed once per host. One
    memo per Python (``sys.implementation.cache_tag``): ``ast.dump`` differs between 3.11 and
    3.13, so a skeleton parsed by one and its edited file parsed by the other never matched
    (the 3.11 line re-ran every harness after a one-rule edit)."""

    def __init__(self, sha: Any, path: Path | None = None) -> None:
        super().__init__(path, "FARM_UNIT_CACHE", f"unit-digests-{UNITS_VERSION}-{sys.implementation.cache_tag}.json")
        self._sha = sha  # path -> content sha256 (memoized by stat: ``farm.cache.key.FILES.sha``)
        self._parsed: dict[str, FileUnits] = {}

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
            with self._lock:
                memo[sha] = got.to_json()
                self._dirty = True
        self._parsed[sha] = got
        return got


# ------------------------------------------------------------------ the tree
class Tree:
    """The jax tree as units: its global digest, and the digest of any recorded part now."""

    def __init__(self, root: str, units: UnitDigests, sha: Any) -> None:
        self.root = os.path.realpath(root)
        self._units, self._sha = units, sha
        self._global: str | None = None
        self._parts: dict[str, str] = {}

    def files(self) -> list[str]:
        return walk_files(self.root)

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
