"""The verdict on a serialized artifact's derivatives (``farm.stages.gradients``), three ways:

1. **against ``jax.vjp``** of the original function at the same point: the same derivative
   rules, traced, lowered and compiled apart from the artifact (the serialize/deserialize
   round trip of the vjp modules, the platform relabelling, float0 cotangents);
2. **against finite differences** of the float64 reference (``farm.reference``: the
   harness's jaxpr evaluated with NumPy): an independent derivative, which a wrong
   derivative rule cannot fool (the artifact and ``jax.vjp`` share the rule). Scalar
   directional derivatives keep it cheap: with a random direction ``u`` over the floating
   inputs, ``u·(Jᵀct)`` against ``(F(x+hu) - F(x-hu)) / 2h`` where ``F = ct·f`` (two
   evaluations);
3. **order 2**, the same one level up: ``u·∂x(w·Jᵀct)`` against the mixed second
   difference of ``F`` along ``u`` and ``w`` (four evaluations), and ``c·(J w)`` against
   the central difference of ``c·f`` along ``w`` (two).

The reference runs in float64, so its steps are small (about ``eps64^(1/3)`` and
``eps64^(1/4)`` of the inputs' size) and its own error is negligible; the tolerance is the
derivative's dtype's (``farm.judge.tolerance.gradient_tolerance``, the values JAX's
``check_grads`` uses), relative to the size of what the dot product summed.

Outputs without a unique reference (eigenvectors: their sign is free) take a zero
cotangent, so neither side sees them; a harness whose outputs have none at all, or whose
jaxpr has a primitive without a reference rule, is judged against ``jax.vjp`` alone and
says why (``facts.finite_differences``). Integer and bool inputs must get ``float0``
cotangents, as JAX defines them.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from farm.catalog import Limitation
from farm.judge.outputs import compare_outputs
from farm.judge.tolerance import gradient_tolerance
from farm.reference import evaluate, missing, plan
from farm.reference.evaluator import flushing_subnormals
from farm.results import Record
from farm.stages.gradients import Point, VjpJaxpr, inexact

#: JAX's own refusals to differentiate, as data: the error each one explains.
KNOWN_GAPS = (
    Limitation("jax: reverse-mode differentiation of a while_loop (or fori_loop with dynamic bounds) is not "
               "supported", stage="vjp", status="error", error=r"Reverse-mode differentiation does not work"),
    Limitation("jax: a primitive without a differentiation rule (its vjp cannot be exported)",
               stage="vjp", status="error", error=r"Differentiation rule for '\w+' not implemented"),
)

#: Relative steps of the central differences, times the inputs' size (at least 1).
STEP_1 = 1e-5
STEP_2 = 1e-4
#: What float64 rounding of the reference's outputs can add to a difference quotient, in
#: units of Σ|weight·output| over the step (to the power of the order): a few eps64.
NOISE = 16 * float(np.finfo(np.float64).eps)


def differenced(jaxpr: Any) -> tuple[list[bool], str | None]:
    """(per output: whether finite differences of the reference may see it, and why none may,
    or None). An output needs a floating dtype and a unique reference (``farm.reference.plan``)."""
    gone = missing(jaxpr)
    if gone:
        return [False] * len(jaxpr.out_avals), f"no reference rule for {', '.join(gone)}"
    kinds = [o.kind for o in plan(jaxpr).outputs]
    mask = [k == "reference" and inexact(a) for k, a in zip(kinds, jaxpr.out_avals)]
    if not any(mask):
        return mask, "no floating output has a unique reference"
    return mask, None


def expected(vj: VjpJaxpr) -> list[np.ndarray | None] | None:
    """``jax.vjp``'s cotangents (its jaxpr, ``farm.stages.gradients.vjp_jaxpr``) evaluated by the
    float64 reference, in the vjp module's output order (None where an output is a float0);
    None where the reference has no rule for one of its primitives."""
    if missing(vj.jaxpr):
        return None
    with np.errstate(all="ignore"), flushing_subnormals():  # as the CPU backend that runs every vjp module
        values = evaluate(vj.jaxpr, *vj.args)
    out: list[np.ndarray | None] = [None] * vj.outputs
    for i, v in zip(vj.returns, values):
        out[i] = v
    return out


def known_gap(rec: Record) -> Record:
    """A record of JAX refusing to differentiate: ``expected_fail`` with the gap named."""
    if rec.status != "error":
        return rec
    gap = next((g for g in KNOWN_GAPS if g.expects("error", rec.error_type, rec.error)), None)
    if gap is None:
        return rec
    return rec.with_status("expected_fail", facts={**rec.facts, "limitation": gap.description})


def pullback(rec: Record, expected: list[np.ndarray | None] | None, point: Point, jaxpr: Any, order: int,
             seed: int = 0, against: str = "jax.vjp") -> Record:
    """``rec`` (one platform's input cotangents in ``rec.handle``) against ``jax.vjp``'s and
    the finite differences of the reference; ``fail`` where either disagrees."""
    if rec.status != "ok":
        return known_gap(rec).with_status(known_gap(rec).status, handle=None)
    try:
        return _judge(rec, expected, point, jaxpr, order, seed, against)
    except Exception as e:  # the reference or the comparison raised: an error, never a pass
        return rec.with_status("error", error_type=type(e).__name__, error=f"judging the vjp raised: {e}"[:500],
                               handle=None)


def same_module(verdict: Record, rec: Record) -> Record:
    """The verdict on another platform's part of the same vjp module (``rec``: the results it
    took from ``verdict``'s platform): the same verdict, on ``rec``'s platform."""
    return verdict.with_status(verdict.status, platform=rec.platform, seconds=0.0,
                               facts={**verdict.facts, "how": rec.facts.get("how"),
                                      "same_module_as": rec.facts.get("same_module_as")})


def _judge(rec: Record, expected: list[np.ndarray | None] | None, point: Point, jaxpr: Any, order: int,
           seed: int, against: str) -> Record:
    got = list(rec.handle)
    want_in = point.args(order)  # what each cotangent is the cotangent of
    facts: dict[str, Any] = {**rec.facts}
    wrong: list[str] = []
    if len(got) != len(want_in):
        wrong.append(f"{len(got)} cotangents for {len(want_in)} inputs")
    float0 = [i for i, x in enumerate(want_in) if not _differentiable(x)]
    if float0:
        facts["float0_inputs"] = float0
    for i in float0:
        if i < len(got) and str(got[i].dtype) != "[('float0', 'V')]" and got[i].dtype.name != "void":
            wrong.append(f"input {i}'s cotangent is {got[i].dtype}, JAX's is float0")
    tol = gradient_tolerance([x.dtype for x in want_in if _differentiable(x)] +
                             [c.dtype for c in point.cotangents(order) if _differentiable(c)])
    facts["tol"] = tol
    if expected is not None and not wrong:
        idx = [i for i in range(len(got)) if i not in float0]
        # rounding first: the reference held as the device holds it (a float64 value past the
        # dtype's range is ±Inf there too), and values under the dtype's smallest normal are zeros
        # (the CPU backend flushes them): the smallest normal is the absolute floor
        with np.errstate(all="ignore"):
            exp = [np.asarray(expected[i]).astype(got[i].dtype).astype(np.float64) for i in idx]
        act = [np.asarray(got[i], dtype=np.float64) for i in idx]
        finite = [float(np.max(np.abs(e[np.isfinite(e)]))) for e in exp if np.isfinite(e).any()]
        tiny = max([_tiny(got[i].dtype) for i in idx] + [0.0])
        atol = tol * max(finite + [0.0]) + tiny
        status, err, metrics = compare_outputs(act, exp, tol, atol, False)
        facts["against_jax"] = {"max_abs_err": metrics.get("max_abs_err", 0.0), "atol": atol, "rtol": tol,
                                "how": against}
        if status != "ok":
            wrong.append(f"against jax.vjp: {err}")
    mask, why = differenced(jaxpr)
    if why is not None:
        facts["finite_differences"] = f"not judged: {why}"
    else:
        checks = _finite_differences(got, point, jaxpr, mask, order, np.random.default_rng(seed + 7 * order))
        facts["finite_differences"] = checks
        for c in checks:
            if c.get("skipped"):
                continue
            bound = tol * (abs(c["reference"]) + c["scale"]) + c["noise"]
            if not abs(c["device"] - c["reference"]) <= bound:
                wrong.append(f"{c['what']}: the artifact's {c['device']:.6g}, finite differences of the float64 "
                             f"reference {c['reference']:.6g} (bound {bound:.3g})")
    if wrong:
        return rec.with_status("fail", error_type="GradientMismatch", error="; ".join(wrong)[:1000],
                               facts={**facts, "mismatches": wrong}, handle=None)
    return rec.with_status("ok", facts=facts, handle=None)


def _tiny(dtype: Any) -> float:
    import ml_dtypes  # noqa: PLC0415  (loaded by jax already)

    return float(ml_dtypes.finfo(dtype).tiny)


def _differentiable(x: Any) -> bool:
    return inexact(x)


def _finite_differences(got: list[np.ndarray], point: Point, jaxpr: Any, mask: list[bool], order: int,
                        rng: np.random.Generator) -> list[dict[str, Any]]:
    """The directional derivatives of ``got`` against central differences of the reference."""
    xs = [np.asarray(x) for x in point.primals]
    flo = [i for i, x in enumerate(xs) if _differentiable(x)]
    size = max([1.0] + [float(np.max(np.abs(xs[i].astype(np.float64)))) for i in flo if xs[i].size])
    u = {i: rng.standard_normal(xs[i].shape) for i in flo}
    cts = [np.asarray(c, dtype=np.float64) if m else None for c, m in zip(point.ct, mask)]

    def f_at(steps: Sequence[tuple[float, dict[int, np.ndarray]]]) -> list[np.ndarray]:
        args = [x.astype(np.float64) if i in u else x for i, x in enumerate(xs)]
        for h, d in steps:
            for i, v in d.items():
                args[i] = args[i] + h * v
        with np.errstate(all="ignore"):
            return evaluate(jaxpr, *args)

    def dot(weights: Sequence[np.ndarray | None], outs: list[np.ndarray]) -> float:
        return float(sum(np.sum(w * np.asarray(o, dtype=np.float64)) for w, o in zip(weights, outs)
                         if w is not None))

    def size_of(weights: Sequence[np.ndarray | None], outs: list[np.ndarray]) -> float:
        """Σ|weight·output|: what rounding the reference's outputs can move a difference by."""
        return float(sum(np.sum(np.abs(w * np.asarray(o, dtype=np.float64))) for w, o in zip(weights, outs)
                         if w is not None))

    def scale(ws: dict[int, np.ndarray], vs: Sequence[Any]) -> tuple[float, float]:
        terms = [w * np.asarray(vs[i], dtype=np.float64) for i, w in ws.items()]
        return float(sum(np.sum(t) for t in terms)), float(sum(np.sum(np.abs(t)) for t in terms))

    out: list[dict[str, Any]] = []
    if order == 1:
        h = STEP_1 * size
        plus, minus = f_at([(h, u)]), f_at([(-h, u)])
        ref = (dot(cts, plus) - dot(cts, minus)) / (2 * h)
        dev, mag = scale(u, got)
        out.append(_check("u·Jᵀct", dev, ref, mag, h, NOISE * size_of(cts, plus) / h))
        return out
    n = len(xs)
    w = {i: np.asarray(point.w[i], dtype=np.float64) for i in flo}
    h = STEP_2 * size
    corners = [f_at([(a, u), (b, w)]) for a, b in ((h, h), (h, -h), (-h, h), (-h, -h))]
    mixed = (dot(cts, corners[0]) - dot(cts, corners[1]) - dot(cts, corners[2]) + dot(cts, corners[3])) / (4 * h * h)
    dev, mag = scale(u, got[:n])
    out.append(_check("u·∂x(w·Jᵀct)", dev, mixed, mag, h, NOISE * size_of(cts, corners[0]) / (h * h)))
    c2 = {j: rng.standard_normal(np.shape(point.ct[j])) for j, m in enumerate(mask) if m}
    weights = [c2.get(j) for j in range(len(mask))]
    h1 = STEP_1 * size
    plus, minus = f_at([(h1, w)]), f_at([(-h1, w)])
    ref = (dot(weights, plus) - dot(weights, minus)) / (2 * h1)
    dev, mag = scale(c2, got[n:])
    out.append(_check("c·(J w)", dev, ref, mag, h1, NOISE * size_of(weights, plus) / h1))
    return out


def _check(what: str, dev: float, ref: float, mag: float, h: float, noise: float) -> dict[str, Any]:
    """One directional derivative: the device's, the reference's, the size of the terms the
    device summed and the reference's own rounding noise; skipped where the reference is not
    finite near the point (outside a domain)."""
    c: dict[str, Any] = {"what": what, "device": dev, "reference": ref, "scale": mag, "step": h, "noise": noise}
    if not np.isfinite(ref):
        c["skipped"] = "the reference is not finite within a step of the point"
    return c
