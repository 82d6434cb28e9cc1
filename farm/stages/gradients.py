"""vjp, vjp2: a harness's multi-platform export serialized with its derivatives
(``Exported.serialize(vjp_order=k)``), read back, and its vjp taken here.

- ``serialize``: the export (the export stage's own ``jax.export.Exported``, which knows how
  to export its vjp) serialized with ``vjp_order`` orders of vjp and deserialized;
- ``pullbacks``: for each platform of the artifact, the cotangents of its inputs at order 1
  (``vjp``) and, where asked, order 2 (``vjp2``). The cpu's are ``jax.vjp`` of the
  deserialized ``Exported.call`` (the path a user takes: jax finds the serialized vjp
  module through ``Exported.call``'s custom vjp); another platform's are its part of the
  serialized vjp module, relabelled so the CPU backend runs it (as ``farm.stages.effects``
  and crossexec do). A vjp module whose ``stablehlo.case`` ops (how a multi-platform module
  branches on its platform) have no two branches that differ computes the same for every
  platform (``branched``: jax emits a case wherever a primitive has platform-specific
  lowering rules, even when they lower to the same ops, as dot_general's do): the other
  platforms take the cpu's results (``same_module_as``) instead of compiling it again;
- ``vjp_jaxpr``: ``jax.vjp`` of the original function at the same point as a jaxpr, which
  the judge evaluates with the float64 reference (``farm.judge.gradients``): the first thing
  it holds them against; ``expected``: the same compiled and run here, where the reference
  has no rule for a primitive of it.

Order 2 is the vjp of the order-1 vjp function ``(x, ct) -> Jᵀct`` with a cotangent ``w``
for its outputs: ``(∂x (w·Jᵀct), J w)``. Integer and bool inputs and outputs take
``float0`` cotangents, as JAX defines them.

Records say what ran; whether it is right is the judge's.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.results import Record
from farm.stages.compile import check_options, checked_call as compiled, not_runnable
from farm.stages.parts import branched, module_text, relabelled
from farm.stages.record import Timer, failure

#: The orders of vjp the farm serializes and judges (``farm sweep --vjp``).
ORDERS = (1, 2)
#: Each order's stage name.
STAGE_OF_ORDER = {1: "vjp", 2: "vjp2"}


@dataclass(frozen=True, slots=True)
class Point:
    """Where the derivatives are taken: the primal inputs, the output cotangents ``ct`` and,
    for order 2, the cotangents ``w`` of the order-1 vjp's outputs (one per input).
    ``float0`` arrays where an input or output is an integer or a bool."""

    primals: tuple[Any, ...]
    ct: tuple[Any, ...]
    w: tuple[Any, ...] = ()

    def args(self, order: int) -> tuple[Any, ...]:
        """The arguments of the order-``order`` vjp module (primals, cotangents...)."""
        return self.primals + self.ct if order == 2 else self.primals

    def cotangents(self, order: int) -> tuple[Any, ...]:
        return self.ct if order == 1 else self.w


@dataclass(frozen=True, slots=True)
class GradSerialized(Record):
    """stage ``vjp``, platform ``export``: the artifact with ``vjp_order`` orders of vjp;
    facts: ``vjp_order``, ``platforms``, ``vjp_platforms`` (what the vjp modules were
    exported for), ``branches`` ({order: whether the vjp module's platforms compute differently});
    ``handle``: the deserialized ``jax.export.Exported``."""


@dataclass(frozen=True, slots=True)
class Pullback(Record):
    """stage ``vjp`` or ``vjp2`` on one platform: the input cotangents its module computed
    (``handle``: a list of arrays, ``float0`` ones included); facts: ``order``, ``how``."""


def serialize(exported: Any, order: int) -> GradSerialized:
    """``exported`` (a live ``jax.export.Exported``) serialized with ``order`` orders of vjp,
    then read back."""
    from jax import export

    timer = Timer()
    facts: dict[str, Any] = {"vjp_order": order, "platforms": list(exported.platforms)}
    try:
        with timer():
            blob = bytes(exported.serialize(vjp_order=order))
            back = export.deserialize(bytearray(blob))
            branches, vjp = {}, back
            for k in range(1, order + 1):
                vjp = vjp.vjp()
                branches[str(k)] = branched(module_text(vjp))
        return GradSerialized("vjp", "export", "ok", timer.seconds, metrics={"artifact_bytes": float(len(blob))},
                              facts={**facts, "vjp_platforms": list(back.vjp().platforms), "branches": branches},
                              handle=back)
    except Exception as e:
        return failure(GradSerialized, "vjp", "export", e, timer.seconds, facts=facts)


def pullbacks(ser: GradSerialized, order: int, point: Point) -> list[Pullback]:
    """One record per platform of the artifact: the order-``order`` input cotangents its
    serialized vjp module computes at ``point`` on the CPU backend."""
    back = ser.handle
    stage = STAGE_OF_ORDER[order]
    platforms = tuple(back.platforms)
    vjp = back
    for _ in range(order):
        vjp = vjp.vjp()
    out: list[Pullback] = []
    first: Pullback | None = None
    differs = ser.facts.get("branches", {}).get(str(order), True)
    for p in platforms:
        if first is not None and first.status == "ok" and not differs:
            out.append(dataclasses.replace(first, platform=p, seconds=0.0, facts={
                **first.facts, "how": f"{first.platform}'s results: the vjp module has no platform branch",
                "same_module_as": first.platform}))
            continue
        rec = _pullback(back, vjp, p, platforms, order, point, stage)
        out.append(rec)
        first = first or rec
    return out


def _pullback(back: Any, vjp: Any, p: str, platforms: tuple[str, ...], order: int, point: Point,
              stage: str) -> Pullback:
    import jax

    timer = Timer()
    how = "jax.vjp of the deserialized Exported.call" if p == "cpu" else \
        f"the deserialized order-{order} vjp module, relabelled so the CPU runs {p}'s part"
    facts: dict[str, Any] = {"order": order, "how": how, "compiler_options": check_options()}
    try:
        with timer():
            if p == "cpu":
                fun = back if order == 1 else back.vjp()
                n = len(point.args(order))

                def pullback(*args: Any) -> Any:  # under jit: one compile, the forward call left out
                    _, pull = jax.vjp(fun.call, *args[:n])
                    return pull(jax.tree.unflatten(fun.out_tree, list(args[n:])))

            else:
                pullback = relabelled(vjp, p).call
            cts = compiled(pullback, *point.args(order), *point.cotangents(order))
            arrays = [np.asarray(c) for c in jax.tree.leaves(cts)]
        return Pullback(stage, p, "ok", timer.seconds, facts=facts, handle=arrays)
    except Exception as e:
        rec = failure(Pullback, stage, p, e, timer.seconds, facts=facts)
        return not_runnable(rec, str(e))  # a platform's custom call with no CPU handler


def _vjp_of(fun: Any, point: Point, order: int) -> Any:
    """``jax.vjp`` of the original (flat-output) function at order ``order``, as a function of
    the order-``order`` vjp module's arguments (primals, cotangents...), returning its input
    cotangents as a tuple."""
    import jax

    n = len(point.primals)

    def flat(*xs: Any) -> list[Any]:
        return jax.tree.leaves(fun(*xs))

    def first(*xs_and_ct: Any) -> tuple[Any, ...]:
        return tuple(jax.vjp(flat, *xs_and_ct[:n])[1](list(xs_and_ct[n:])))

    def second(*args: Any) -> tuple[Any, ...]:
        m = n + len(point.ct)
        return tuple(jax.vjp(first, *args[:m])[1](tuple(args[m:])))

    return first if order == 1 else second


def expected(fun: Any, point: Point, order: int) -> list[np.ndarray]:
    """``jax.vjp`` of the original function at ``point``, compiled and run here: what the
    artifact's vjp modules should compute, by the same derivative rules."""
    import jax

    # under jit, as the artifact's vjp modules are: one compile, not one per primitive
    cts = compiled(_vjp_of(fun, point, order), *point.args(order), *point.cotangents(order))
    return [np.asarray(c) for c in jax.tree.leaves(cts)]


@dataclass(frozen=True, slots=True)
class VjpJaxpr:
    """``jax.vjp`` of the original function at ``point`` as a jaxpr over the point's floating
    values alone (integer inputs and float0 cotangents bound), for the float64 reference to
    evaluate (``farm.judge.gradients.expected``): ``returns[k]`` is the position, among the
    vjp module's outputs, of the jaxpr's output ``k``."""

    jaxpr: Any
    args: tuple[Any, ...]
    returns: tuple[int, ...]
    outputs: int


def vjp_jaxpr(fun: Any, point: Point, order: int) -> VjpJaxpr:
    import jax

    full = _vjp_of(fun, point, order)
    args = point.args(order) + point.cotangents(order)
    free = [i for i, a in enumerate(args) if inexact(a)]
    returns = tuple(i for i, a in enumerate(point.args(order)) if inexact(a))

    def floating(*values: Any) -> list[Any]:
        bound = list(args)
        for i, v in zip(free, values):
            bound[i] = v
        outs = full(*bound)
        return [outs[i] for i in returns]

    given = tuple(args[i] for i in free)
    return VjpJaxpr(jax.make_jaxpr(floating)(*given), given, returns, len(point.args(order)))


def inexact(x: Any) -> bool:
    """Whether ``x`` (an array or an aval) is a real floating value: one with a derivative."""
    try:
        dt = np.dtype(getattr(x, "dtype", np.float32))
    except TypeError:  # a PRNG key
        return False
    return dt.kind == "f" or dt.name.startswith(("bfloat16", "float8", "float4"))


def float0_like(shape: Sequence[int]) -> np.ndarray:
    """JAX's cotangent of an integer or bool value of this shape."""
    from jax import dtypes

    return np.zeros(tuple(shape), dtype=dtypes.float0)
