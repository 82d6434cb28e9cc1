"""The registry: ``define()`` appends a harness to its catalog; ``load()``, ``select()`` and
``Filters`` pick harnesses back out of it.
"""
from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from farm.catalog.args import Arg, _shape_of
from farm.catalog.dtypes import DTYPES, INTEGER
from farm.catalog.effects import Effects
from farm.catalog.features import ExportFeature
from farm.catalog.harness import Harness, HarnessKey, Limitation, Poly
from farm.catalog.pallas import Kernel
from farm.errors import ConfigError, UnknownName
from farm.platforms import LOWERING_PLATFORMS

_REGISTRY: dict[str, list[Harness]] = {}
_LOADED: set[str] = set()

#: Family modules of the farm's own catalog, imported on first use.
FARM_FAMILIES: tuple[str, ...] = (
    "elementwise_unary", "elementwise_binary", "comparison", "bitwise", "conversion",
    "reduction", "cumulative", "dot_conv", "shape", "indexing", "sort", "control_flow",
    "linalg", "random", "fft", "special", "collective", "sharding", "found", "xla_cpu_findings", "symbolic",
    "effects", "export_features",
)


def harness_key(primitive: str, group: str | None, dtype: str, shapes: Sequence[tuple[int, ...]],
                params: dict[str, Any] | None) -> HarnessKey:
    """The key ``define`` gives a harness (its name comes from it)."""
    return HarnessKey(primitive=primitive, group=group or primitive, dtype=dtype,
                      shapes=tuple(tuple(int(d) for d in s) for s in shapes),
                      params=tuple(sorted((k, str(v)) for k, v in (params or {}).items())))


def define(
    family: str,
    primitive: str,
    fun: Callable[..., Any],
    args: Sequence[Arg],
    *,
    dtype: str,
    group: str | None = None,
    params: dict[str, Any] | None = None,
    reference: Callable[..., Any] | None = None,
    compare: str | None = None,
    invariant: Callable[..., Any] | None = None,
    limitations: Iterable[Limitation] = (),
    tol: tuple[float, float] | None = None,
    devices: int = 1,
    catalog: str = "farm",
    source: str = "",
    arg_maker: Callable[[int], list[Any]] | None = None,
    shapes: Sequence[tuple[int, ...]] | None = None,
    timeout_s: float | None = None,
    mesh: Sequence[tuple[str, int]] = (),
    in_specs: Sequence[Any] = (),
    collective_axes: Sequence[str] = (),
    partitioner: str = "",
    axis_types: str = "auto",
    constraints: Sequence[tuple[Sequence[tuple[str, int]], Sequence[Any]]] = (),
    poly: Poly | None = None,
    jax_config: Sequence[tuple[str, Any]] = (),
    effects: Effects | None = None,
    pallas: Kernel | None = None,
    feature: ExportFeature | None = None,
    needs: dict[str, str] | None = None,
) -> Harness:
    """Declare one harness and append it to its catalog's registry."""
    if dtype not in DTYPES:
        raise UnknownName("dtype", dtype, DTYPES)
    if shapes is None:
        shapes = [s for s in (_shape_of(a) for a in args) if s is not None]
    key = harness_key(primitive, group, dtype, shapes, params)
    if compare is None:
        compare = "exact" if dtype in INTEGER + ("bool",) else ("allclose" if reference else "none")
    h = Harness(
        key=key, fun=fun, args=tuple(args), family=family, catalog=catalog, reference=reference,
        compare=compare, invariant=invariant, limitations=tuple(limitations), tol=tol,
        devices=devices, source=source, arg_maker=arg_maker, timeout_s=timeout_s,
        mesh=tuple((str(n), int(k)) for n, k in mesh), in_specs=tuple(in_specs),
        collective_axes=tuple(collective_axes), partitioner=partitioner, axis_types=axis_types,
        constraints=tuple((tuple((str(n), int(k)) for n, k in m), tuple(sp)) for m, sp in constraints),
        poly=poly, jax_config=tuple((str(k), v) for k, v in jax_config), effects=effects,
        pallas=pallas,
        feature=feature, needs=tuple((needs or {}).items()),
    )
    _REGISTRY.setdefault(catalog, []).append(h)
    return h


CATALOGS = ("farm", "upstream", "shape_poly", "pallas", "all")
#: Modules of the ``pallas`` catalog: the kernels shipped in the jax wheel, and the farm's own.
PALLAS_MODULES: tuple[str, ...] = ("harnesses.pallas_ops", "harnesses.pallas")


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
        # Imported here, not at the top: farm.catalog.upstream imports farm.catalog (a cycle at
        # import time), and only the upstream catalog needs it (jax's catalog costs ~1.5 s).
        from farm.catalog import upstream

        upstream.register()
        _LOADED.add("upstream")
    if catalog == "pallas" and "pallas" not in _LOADED:
        for mod in PALLAS_MODULES:
            importlib.import_module(mod)
        _LOADED.add("pallas")
    if catalog == "shape_poly":
        from farm.catalog import shape_poly  # imported here: it imports jax and JAX's test modules

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


def by_fingerprint(harnesses: Iterable[Harness]) -> dict[str, Harness]:
    return {h.fingerprint: h for h in harnesses}


def check_platforms(platforms: Iterable[str]) -> tuple[str, ...]:
    out = tuple(platforms)
    for p in out:
        if p not in LOWERING_PLATFORMS:
            raise UnknownName("platform", p, LOWERING_PLATFORMS)
    return out
