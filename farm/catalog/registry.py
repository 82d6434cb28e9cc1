"""The registry: ``load()`` imports a catalog (the farm's family modules, the Pallas modules, the
adapters of JAX's own catalogs), ``select()`` and ``Filters`` pick harnesses out of what
``define()`` (``farm.catalog.definitions``) declared.
"""
from __future__ import annotations

import fnmatch
import functools
import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from farm.catalog import shape_poly, upstream
from farm.catalog.definitions import _REGISTRY, define, harness_key  # noqa: F401  (this module's public face)
from farm.catalog.dtypes import DTYPES
from farm.catalog.harness import Harness
from farm.errors import ConfigError, UnknownName
from farm.platforms import LOWERING_PLATFORMS

_LOADED: set[str] = set()

#: Family modules of the farm's own catalog, imported on first use.
FARM_FAMILIES: tuple[str, ...] = (
    "elementwise_unary", "elementwise_binary", "comparison", "bitwise", "conversion",
    "reduction", "cumulative", "dot_conv", "shape", "indexing", "sort", "control_flow",
    "linalg", "random", "fft", "special", "collective", "sharding", "found", "xla_cpu_findings", "symbolic",
    "effects", "export_features",
)


CATALOGS = ("farm", "upstream", "shape_poly", "pallas", "api", "all")
#: Modules of the ``pallas`` catalog: the kernels shipped in the jax wheel, the farm's own, and every lax
#: primitive inside a kernel (family ``pallas_prims``).
PALLAS_MODULES: tuple[str, ...] = ("harnesses.pallas_ops", "harnesses.pallas", "harnesses.pallas_prims",
                                   "harnesses.pallas_features")
#: Modules of the ``api`` catalog: one per api module of jax (``farm.catalog.api``, docs/api.md).
API_MODULES: tuple[str, ...] = tuple(f"harnesses.api_{m}" for m in (
    "numpy", "linalg", "fft", "special", "stats", "signal", "nn", "random"))


def load(catalog: str = "farm", modules: Iterable[str] = (), jax_repo: str | None = None) -> list[Harness]:
    """Import a catalog's family modules (once) and return its harnesses; ``jax_repo``: the jax
    repository the ``shape_poly`` catalog is read from (``$FARM_JAX_REPO`` when None)."""
    for mod in modules:
        if mod not in _LOADED:
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as e:
                raise ConfigError(f"cannot import harness module {mod!r}: {e}") from None
            _LOADED.add(mod)
    if catalog not in CATALOGS and catalog not in _REGISTRY:
        raise UnknownName("catalog", catalog, set(CATALOGS) | set(_REGISTRY))
    if catalog in ("farm", "all") and "farm" not in _LOADED:
        for fam in FARM_FAMILIES:
            try:
                importlib.import_module(f"harnesses.{fam}")
            except ModuleNotFoundError as e:
                if e.name != f"harnesses.{fam}":
                    raise
        _LOADED.add("farm")
    if catalog in ("upstream", "all") and "upstream" not in _LOADED:
        upstream.register()  # jax's catalog is imported here, on first use (~1.5 s)
        _LOADED.add("upstream")
    if catalog == "pallas" and "pallas" not in _LOADED:
        for mod in PALLAS_MODULES:
            importlib.import_module(mod)
        _LOADED.add("pallas")
    if catalog == "api" and "api" not in _LOADED:
        for mod in API_MODULES:
            importlib.import_module(mod)
        _LOADED.add("api")
    if catalog == "shape_poly":
        if shape_poly.stale(jax_repo):  # not read yet, or read from another repository
            _REGISTRY.pop("shape_poly", None)
            shape_poly.register(jax_repo)
    if catalog == "all":
        return _REGISTRY.get("farm", []) + _REGISTRY.get("upstream", [])
    return list(_REGISTRY.get(catalog, []))


@dataclass(frozen=True, slots=True)
class Filters:
    """A selection: each field a tuple of accepted values (empty = any)."""

    catalog: str = "farm"
    primitive: tuple[str, ...] = ()
    group: tuple[str, ...] = ()
    dtype: tuple[str, ...] = ()
    family: tuple[str, ...] = ()
    name: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    limit: int | None = None
    jax_repo: str | None = None  # the shape_poly catalog's jax repository

    @classmethod
    def parse(cls, catalog: str = "farm", primitive: str | None = None, group: str | None = None,
              dtype: str | None = None, family: str | None = None, name: str | None = None,
              modules: str | None = None, limit: int | None = None, jax_repo: str | None = None) -> "Filters":
        split = lambda s: tuple(x.strip() for x in s.split(",") if x.strip()) if s else ()
        return cls(catalog=catalog, primitive=split(primitive), group=split(group), dtype=split(dtype),
                   family=split(family), name=split(name), modules=split(modules), limit=limit,
                   jax_repo=jax_repo)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in
                ((f, getattr(self, f)) for f in self.__dataclass_fields__) if k != "jax_repo" or v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Filters":
        """The filters of a stored run's selection (which also holds its ``shapes``, when not static alone)."""
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k != "shapes"})


def select(filters: Filters) -> list[Harness]:
    """Harnesses matching every filter. Unknown values raise ``UnknownName``."""
    harnesses = load(filters.catalog, filters.modules, filters.jax_repo)
    for d in filters.dtype:
        if d not in DTYPES:
            raise UnknownName("dtype", d, DTYPES)
    checks = (("primitive", filters.primitive), ("group", filters.group), ("family", filters.family))
    for attr, wanted in checks:
        if wanted:
            known = {getattr(h, attr) for h in harnesses}
            for w in wanted:
                if w not in known:
                    raise UnknownName(attr, w, known)
    out = []
    for h in harnesses:
        if filters.primitive and h.primitive not in filters.primitive:
            continue
        if filters.group and h.group not in filters.group:
            continue
        if filters.family and h.family not in filters.family:
            continue
        if filters.dtype and h.dtype not in filters.dtype:
            continue
        if filters.name and not any(
            (fnmatch.fnmatchcase(h.name, pat) if any(c in pat for c in "*?[") else pat in h.name)
            for pat in filters.name
        ):
            continue
        out.append(h)
    if filters.limit is not None:
        out = out[: filters.limit]
    return out


@functools.cache
def _representatives(catalog: str) -> frozenset[str]:
    """Per primitive of a catalog, the fingerprint of the harness that stands for it."""
    first: dict[str, str] = {}
    for h in load(catalog):
        if h.primitive not in first or h.fingerprint < first[h.primitive]:
            first[h.primitive] = h.fingerprint
    return frozenset(first.values())


def representative(h: Harness) -> bool:
    """Whether ``h`` stands for its primitive in its catalog: the harness with the smallest
    fingerprint among the catalog's of that primitive (the same on every run and host)."""
    return h.fingerprint in _representatives(h.catalog)


def by_fingerprint(harnesses: Iterable[Harness]) -> dict[str, Harness]:
    return {h.fingerprint: h for h in harnesses}


def check_platforms(platforms: Iterable[str]) -> tuple[str, ...]:
    out = tuple(platforms)
    for p in out:
        if p not in LOWERING_PLATFORMS:
            raise UnknownName("platform", p, LOWERING_PLATFORMS)
    return out
