"""``define``: one harness declared into its catalog, by every family module and by the
adapters of JAX's own catalogs (``upstream``, ``shape_poly``), and the harnesses defined so far.
Selecting among them is ``registry``'s, which imports the adapters: they import this, never it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from farm.catalog.args import Arg, _shape_of
from farm.catalog.dtypes import DTYPES, INTEGER
from farm.catalog.effects import Effects
from farm.catalog.features import ExportFeature
from farm.catalog.harness import Harness, HarnessKey, Limitation, Poly
from farm.catalog.pallas import Kernel
from farm.errors import UnknownName

#: Every harness defined so far, per catalog.
_REGISTRY: dict[str, list[Harness]] = {}


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
