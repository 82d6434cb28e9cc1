"""The ``vjp`` and ``vjp2`` stages of one harness (``farm sweep --vjp [1|2]``): its
multi-platform export serialized with its vjp modules, read back, and the vjp of every
platform's part taken on the CPU (``farm.stages.gradients``), each judged against
``jax.vjp`` and finite differences of the float64 reference (``farm.judge.gradients``).

A harness that cannot be differentiated gets one ``skipped`` record saying why (no
floating input or output: comparisons, argmax, bitwise, integer dtypes, random bits; a
complex one; side effects; a sharded one), so a sweep counts them instead of dropping
them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.catalog import Harness
from farm import judge
from farm.pipeline.check import Base, Produced, Run
from farm.results import Record, check_spec
from farm.stages import gradients
from farm.stages.gradients import ORDERS, STAGE_OF_ORDER, Point
from farm.stages.record import failure


#: How the expected cotangents were made where the float64 reference could not make them, or
#: disagreed with the artifact's.
COMPILED = "jax.vjp compiled and run on the CPU"


def run_gradients(h: Harness, jitted: Any, dyn: list[Any], jaxpr: Any, exported: Any, order: int) -> list[Record]:
    """Judged records of every vjp order up to ``order``; one ``skipped`` record where ``h``
    has nothing to differentiate. ``exported``: the export stage's live ``jax.export.Exported``
    (None where the export failed). Never raises: the harness's other records must survive."""
    if order not in ORDERS:
        raise ValueError(f"vjp order {order} is not one of {ORDERS}")
    why = not_differentiable(h, dyn, jaxpr)
    if why is None and exported is None:
        why = "the export did not succeed"
    if why is not None:
        return [Record("vjp", "any", "skipped", error=f"not differentiated: {why}", facts={"reason": why})]
    try:
        return _run(h, jitted, dyn, jaxpr, exported, order)
    except Exception as e:  # the farm's own bug: an error record, never a pass
        return [failure(Record, "vjp", "export", e, 0.0)]


def _run(h: Harness, jitted: Any, dyn: list[Any], jaxpr: Any, exported: Any, order: int) -> list[Record]:
    ser = gradients.serialize(exported, order)
    head = judge.known_gap(ser)
    recs: list[Record] = [head.with_status(head.status, handle=None)]
    if ser.status != "ok":
        return recs
    mask, _ = judge.differenced(jaxpr)
    point = draw(dyn, jaxpr, mask, order, np.random.default_rng(h.seed + 1))
    for k in range(1, order + 1):
        want = compiled = unexpected = None
        how = "jax.vjp's jaxpr evaluated by the float64 reference"
        try:
            try:
                want = judge.expected(gradients.vjp_jaxpr(jitted, point, k))
            except Exception:  # noqa: BLE001  the reference cannot evaluate it (a literal it cannot hold...)
                want = None
            if want is None:  # a primitive the reference has no rule for: jax.vjp compiled and run here
                want = compiled = gradients.expected(jitted, point, k)
                how = COMPILED
        except Exception as e:  # jax.vjp of the original raised where the artifact's may not: recorded, not judged
            unexpected = failure(Record, STAGE_OF_ORDER[k], "expected", e, 0.0)
            want = None
        pulled = gradients.pullbacks(ser, k, point)
        if unexpected is not None:
            recs.append(unexpected if any(r.status == "ok" for r in pulled) else unexpected.with_status(
                # nothing ran here to hold against it (lu in float16: the CPU's LAPACK has no such
                # kernel, and the artifact is the other platforms' solver calls)
                "not_runnable_here", facts={"reason": "neither jax.vjp nor any platform's vjp module runs here"}))
        judged: dict[str, Record] = {}
        for r in pulled:
            same = r.facts.get("same_module_as")
            if same in judged:  # the same module's results: the same verdict, judged once
                recs.append(judge.same_module(judged[same], r))
                continue
            verdict = judge.verdict(r, expected=want, point=point, jaxpr=jaxpr, order=k, seed=h.seed, against=how)
            if judge.disagrees_with_jax(verdict) and how != COMPILED:
                # float64 is not the dtype: an intermediate that overflows, a tie broken by rounding...
                # the compiled jax.vjp, in the same dtypes on the same backend, has the last word
                try:
                    compiled = compiled if compiled is not None else gradients.expected(jitted, point, k)
                    verdict = judge.verdict(r, expected=compiled, point=point, jaxpr=jaxpr, order=k, seed=h.seed,
                                            against=COMPILED)
                except Exception:  # noqa: BLE001  jax.vjp does not compile: the float64 verdict stands
                    pass
            judged[r.platform] = verdict
            recs.append(verdict)
    return recs


def draw(dyn: list[Any], jaxpr: Any, mask: list[bool], order: int, rng: np.random.Generator) -> Point:
    """The point: the harness's inputs, a random cotangent for each floating output (zero
    where the output has no unique reference and another has: ``mask``), float0 for integer
    and bool ones; for order 2, a random cotangent ``w`` for each floating input's
    cotangent."""
    outs = list(jaxpr.out_avals)
    use_mask = any(mask)
    ct = []
    for a, m in zip(outs, mask):
        if not gradients.inexact(a):
            ct.append(gradients.float0_like(a.shape))
        elif use_mask and not m:
            ct.append(np.zeros(a.shape, dtype=a.dtype))
        else:
            ct.append(rng.standard_normal(a.shape).astype(a.dtype))
    w = []
    if order >= 2:
        # zero where finite differences hold the input still (``judge.movable``): the same draws
        moved = judge.movable(dyn, jaxpr)
        w = [np.where(moved[i], rng.standard_normal(np.shape(x)), 0.0).astype(np.asarray(x).dtype)
             if i in moved else gradients.float0_like(np.shape(x)) for i, x in enumerate(dyn)]
    return Point(tuple(dyn), tuple(ct), tuple(w))


def not_differentiable(h: Harness, dyn: list[Any], jaxpr: Any) -> str | None:
    """Why ``h`` has no derivative to judge (None: it has one)."""
    if h.effects is not None:
        return "a harness with side effects"
    if h.mesh or h.devices > 1:
        return "a sharded harness"
    kinds = {_kind(x) for x in dyn} | {_kind(a) for a in jaxpr.out_avals}
    if "c" in kinds:
        return "complex values (finite differences of a complex function are not judged)"
    if not any(gradients.inexact(x) for x in dyn):
        return "no floating-point input"
    if not any(gradients.inexact(a) for a in jaxpr.out_avals):
        return "no floating-point output"
    return None


def _kind(x: Any) -> str:
    try:
        return np.dtype(getattr(x, "dtype", np.float32)).kind
    except TypeError:  # a PRNG key
        return "V"


class GradientsCheck(Base):
    """``--vjp [1|2]``, on the static path of a harness this host can run (not an abstract mesh)."""

    spec = check_spec("gradients")

    def applies(self, run: Run) -> bool:
        return bool(run.opts.vjp) and run.static and not run.abstract

    def run(self, run: Run) -> Produced:
        handle = run.traced.handle
        return run_gradients(run.h, handle.jitted, handle.dyn, handle.traced.jaxpr, run.exported, run.opts.vjp), []


CHECK = GradientsCheck()
