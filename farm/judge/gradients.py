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
derivative's dtype's (``farm.judge.tolerance``, kind ``gradient``: the values JAX's
``check_grads`` uses), relative to the size of what the dot product summed.

Outputs without a unique reference (eigenvectors: their sign is free) take a zero
cotangent, so neither side sees them; a harness whose outputs have none at all, or whose
jaxpr has a primitive without a reference rule, is judged against ``jax.vjp`` alone and
says why (``facts.finite_differences``). Integer and bool inputs must get ``float0``
cotangents, as JAX defines them.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from farm.catalog import Limitation
from farm.catalog.known import holds_on
from farm.judge.outputs import compare_outputs
from farm.judge.tolerance import Computation, allowed
from farm.reference import AmbiguousResult, evaluate, missing, plan
from farm.reference.evaluator import flushing_subnormals
from farm.results import Record
from farm.stages.gradients import Point, VjpJaxpr, inexact

#: JAX's own refusals to differentiate, as data: the error each one explains.
KNOWN_GAPS = (
    Limitation("jax: reverse-mode differentiation of a while_loop (or fori_loop with dynamic bounds) is not "
               "supported", stage="vjp", status="error", error=r"Reverse-mode differentiation does not work"),
    Limitation("jax: a primitive without a differentiation rule (its vjp cannot be exported)",
               stage="vjp", status="error", error=r"Differentiation rule for '\w+' not implemented"),
    Limitation("jax: gradients of some operands are not implemented (scatter_mul without unique_indices, "
               "betainc with respect to a and b, polygamma with respect to m)", stage="vjp", status="error",
               error=r"gradients are only implemented if|gradient with respect to \w+( and \w+)? (is )?not supported"),
    Limitation("jax 0.10.2: the vjp of a variadic reduce (max with its index) passes a symbolic Zero cotangent "
               "to reshape", stage="vjp", status="error",
               error=r"Error interpreting argument to reshape as a JAX value.*ad_util.Zero"),
    Limitation("jax 0.5.3: Exported.vjp of a variadic reduce with an integer output (max with its index) hands "
               "jax.vjp a float0 Zero", stage="vjp", status="error",
               error=r"Argument 'Zero\(ShapedArray\(float0\[.*is not a valid JAX type", jax="<=0.5.3"),
    Limitation("jax 0.10.2: the vjp of clamp with scalar bounds and an array operand selects between a "
               "scalar and an array", stage="vjp", status="error",
               error=r"select cases must have the same shapes"),
    Limitation("jax: custom_linear_solve without a transpose_solve cannot be reverse-differentiated (its "
               "documented refusal)", stage="vjp", status="error",
               error=r"transpose_solve required for backwards mode automatic differentiation of custom_linear_solve"),
    Limitation("jax: a primitive with a forward-mode (JVP) rule and no transpose cannot be reverse-differentiated "
               "(pallas_call: a kernel without its own custom_vjp)", stage="vjp", status="error",
               error=r"Linearization failed to produce known values for all output primals"),
    Limitation("jax: pallas_call's JVP rule refuses scalar-prefetch operands, dynamic grid bounds, aliasing and "
               "meshes", stage="vjp", status="error",
               error=r"^NotImplementedError: (NotImplementedError \(raised in jax/_src/pallas/pallas_call\.py:"
                     r"_pallas_call_jvp_rule\)|interpret with dynamic grid bounds unsupported|JVP with aliasing "
                     r"not supported|pallas_call with a mesh does not support JVP)$"),
    Limitation("jax: pallas_call's JVP rule retraces the kernel outside its grid, so a kernel that calls "
               "program_id or num_programs fails an assertion (https://github.com/jax-ml/jax/pull/37521, open; "
               "forward mode fails too)", stage="vjp", status="error",
               error=r"^AssertionError: AssertionError \(raised in jax/_src/pallas/core\.py:axis_frame\)$"),
    Limitation("jax: pallas_call's JVP rule passes one nonzero flag per input and output, none for a kernel's "
               "scratch operands: ad.jvp_jaxpr asserts (docs/findings.md; forward mode fails too)", stage="vjp",
               status="error", error=r"^AssertionError: AssertionError \(raised in jax/_src/(interpreters/ad\.py:"
                                     r"_jvp_jaxpr|pallas/pallas_call\.py:_pallas_call_jvp_rule)\)$"),
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
    rounding = sorted(_rounding(jaxpr.jaxpr))
    if rounding:
        return [False] * len(jaxpr.out_avals), (f"{', '.join(rounding)} rounds to a float grid: piecewise "
                                                f"constant, where JAX's derivative is the identity")
    kinds = [o.kind for o in plan(jaxpr).outputs]
    mask = [k == "reference" and inexact(a) for k, a in zip(kinds, jaxpr.out_avals)]
    if not any(mask):
        return mask, "no floating output has a unique reference"
    return mask, None


#: Primitives whose value is its operand rounded to a float grid: a staircase whose
#: differences are 0 or a jump, where JAX differentiates it as the identity (straight through):
#: reduce_precision, and nextafter (one step along its dtype's grid; ``jnp.spacing`` is built
#: on it). Conversions are one too where they narrow, or where their grid is coarser than the
#: steps.
ROUNDING = frozenset({"reduce_precision", "nextafter"})


def _rounding(jaxpr: Any) -> set[str]:
    """The rounding equations of ``jaxpr`` and its sub-jaxprs (``ROUNDING``, and conversions
    from one float to a narrower one)."""
    out: set[str] = set()
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ROUNDING:
            out.add(name)
        elif name == "convert_element_type" and inexact(eqn.invars[0].aval) and inexact(eqn.outvars[0].aval):
            import ml_dtypes  # noqa: PLC0415  (loaded by jax already)

            src, dst = ml_dtypes.finfo(eqn.invars[0].aval.dtype), ml_dtypes.finfo(eqn.outvars[0].aval.dtype)
            # narrower than its operand, or a grid coarser than the steps (a float64 step off the bfloat16
            # grid lands between float16 values)
            if dst.nmant < src.nmant or float(dst.eps) > 10 * STEP_1:
                out.add(f"convert_element_type to {np.dtype(eqn.outvars[0].aval.dtype).name}")
        for v in eqn.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    out |= _rounding(inner)
    return out


def _free_outputs(jaxpr: Any) -> list[int]:
    """The floating outputs without a unique value (eigenvectors, singular vectors: ``plan``)."""
    if missing(jaxpr):
        return []
    return [j for j, (o, a) in enumerate(zip(plan(jaxpr).outputs, jaxpr.out_avals))
            if o.kind != "reference" and inexact(a)]


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
    said = raised_in(rec)
    gap = next((g for g in KNOWN_GAPS if g.expects("error", rec.error_type, said) and holds_on(g.jax)), None)
    if gap is None:
        return rec
    return rec.with_status("expected_fail", facts={**rec.facts, "limitation": gap.description})


_FRAME = re.compile(r'^  File "([^"]+)", line \d+, in (\S+)$', re.M)


def raised_in(rec: Record) -> str | None:
    """``rec``'s error, and for an exception without a message (a bare ``assert``, a bare
    ``raise NotImplementedError``) where it was raised: "AssertionError (raised in
    jax/_src/pallas/core.py:axis_frame)", from the innermost frame of the traceback in
    ``rec.detail``. A gap can then name the assertion it means, not every bare one."""
    if not rec.error_type or rec.error not in (None, "", rec.error_type) or not rec.detail:
        return rec.error
    end = re.search(rf"^{re.escape(rec.error_type)}$", rec.detail, re.M)
    frames = _FRAME.findall(rec.detail[:end.start()] if end else rec.detail)
    if not frames:
        return rec.error
    path, fn = frames[-1]
    where = path.split("site-packages/")[-1]
    return f"{rec.error_type} (raised in {where}:{fn})"


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


def disagrees_with_jax(verdict: Record) -> bool:
    """Whether ``verdict`` found the artifact's cotangents away from jax.vjp's."""
    return (verdict.facts.get("against_jax") or {}).get("agrees") is False


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
        facts["float0_inputs"] = float0  # integer or bool arguments of the vjp module: float0 cotangents
    given = [j for j, c in enumerate(point.ct) if not _differentiable(c)]
    if given:
        facts["float0_outputs"] = given  # integer or bool outputs: the float0 cotangents the point gave them
    for i in float0:
        if i < len(got) and str(got[i].dtype) != "[('float0', 'V')]" and got[i].dtype.name != "void":
            wrong.append(f"input {i}'s cotangent is {got[i].dtype}, JAX's is float0")
    rounds_in = tuple([x.dtype for x in want_in if _differentiable(x)] +
                      [c.dtype for c in point.cotangents(order) if _differentiable(c)])
    tol = allowed(Computation(None, "gradient", dtypes=rounds_in)).rtol
    facts["tol"] = tol
    mask, why = differenced(jaxpr)
    free = _free_outputs(jaxpr)
    if order == 2 and free:  # J w of an output whose sign or basis is free: another algorithm's is as right
        facts["not_compared"] = [len(point.primals) + j for j in free]
    if expected is not None and not wrong:
        idx = [i for i in range(len(got)) if i not in float0 and i not in facts.get("not_compared", ())]
        # rounding first: the reference held as the device holds it (a float64 value past the
        # dtype's range is ±Inf there too), and values under the dtype's smallest normal are zeros
        # (the CPU backend flushes them): the smallest normal is the absolute floor
        with np.errstate(all="ignore"):
            exp = [np.asarray(expected[i]).astype(got[i].dtype).astype(np.float64) for i in idx]
        act = [np.asarray(got[i], dtype=np.float64) for i in idx]
        finite = [float(np.max(np.abs(e[np.isfinite(e)]))) for e in exp if np.isfinite(e).any()]
        # the floor: the smallest normal of the cotangent dtypes compared (none where none is)
        smallest = max((got[i].dtype for i in idx), key=_tiny, default=None)
        atol = float(allowed(Computation(smallest, "gradient", dtypes=rounds_in, magnitude=max(finite + [0.0]))).atol)
        status, err, metrics = compare_outputs(act, exp, tol, atol, False)
        facts["against_jax"] = {"max_abs_err": metrics.get("max_abs_err", 0.0), "atol": atol, "rtol": tol,
                                "how": against, "agrees": status == "ok"}
        if status != "ok":
            wrong.append(f"against jax.vjp: {err}")
    if why is not None:
        facts["finite_differences"] = f"not judged: {why}"
    else:
        try:
            checks = _finite_differences(got, point, jaxpr, mask, order, np.random.default_rng(seed + 7 * order))
        except AmbiguousResult as e:  # a scatter to one element twice (jnp.put's duplicate indices)
            checks = [{"what": "finite differences", "skipped": f"the reference has no unique value: {e}"}]
        for i, c in enumerate(checks):
            if c.get("per_element"):
                why, checks[i] = _elements_wrong(c, tol)
                if why is not None:
                    wrong.append(why)
        facts["finite_differences"] = checks
        for c in checks:
            if c.get("skipped") or c["what"] == "per element":
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
    """The directional derivatives of ``got`` against central differences of the reference,
    each at two steps (``_check``)."""
    xs = [np.asarray(x) for x in point.primals]
    flo = [i for i, x in enumerate(xs) if _differentiable(x)]
    u, moved = directions(xs, jaxpr, rng)
    size = max([1.0] + [float(np.max(np.abs(xs[i].astype(np.float64)[moved[i]]))) for i in flo if moved[i].any()])
    cts = [np.asarray(c, dtype=np.float64) if m else None for c, m in zip(point.ct, mask)]

    def f_at(steps: Sequence[tuple[float, dict[int, np.ndarray]]]) -> list[np.ndarray]:
        args = [as_held(x) if i in u else x for i, x in enumerate(xs)]
        for h, d in steps:
            for i, v in d.items():
                args[i] = args[i] + h * v
        # the point as the CPU holds it (``as_held``), the steps not flushed: a step off a zero (1e-5)
        # is below float16's smallest normal, and flushing every equation's operands hid the
        # derivative (pad's float16 padding value)
        with np.errstate(all="ignore"):
            return evaluate(jaxpr, *args)

    def dot(weights: Sequence[np.ndarray | None], outs: list[np.ndarray]) -> float:
        with np.errstate(all="ignore"):  # a zero weight (an output with no neighbourhood) adds nothing, even NaN
            return float(sum(np.sum(np.where(w != 0, w * np.asarray(o, dtype=np.float64), 0.0))
                             for w, o in zip(weights, outs) if w is not None))

    def size_of(weights: Sequence[np.ndarray | None], outs: list[np.ndarray]) -> float:
        """Σ|weight·output|: what rounding the reference's outputs can move a difference by."""
        with np.errstate(all="ignore"):
            return float(sum(np.sum(np.where(w != 0, np.abs(w * np.asarray(o, dtype=np.float64)), 0.0))
                             for w, o in zip(weights, outs) if w is not None))

    def device(ws: dict[int, np.ndarray], vs: Sequence[Any]) -> tuple[float, float, float]:
        """(Σ w·v, Σ|w·v|, Σ|w|·the smallest normal of v's dtype: what flushing or rounding
        cotangents below it may move the sum by)."""
        with np.errstate(all="ignore"):  # an element held still adds nothing, even an inf cotangent
            terms = [np.where(w != 0, w * np.asarray(vs[i], dtype=np.float64), 0.0) for i, w in ws.items()]
            floor = sum(float(np.sum(np.abs(w))) * _tiny(np.asarray(vs[i]).dtype) for i, w in ws.items())
            return float(sum(np.sum(t) for t in terms)), float(sum(np.sum(np.abs(t)) for t in terms)), floor

    at_point: dict[int, float] = {}  # F at the point itself, per weights (computed once)

    def first(weights: Sequence[np.ndarray | None], d: dict[int, np.ndarray], h: float) -> tuple[float, float, float]:
        """(the central difference, its rounding noise, the one-sided differences' spread)."""
        plus, minus = f_at([(h, d)]), f_at([(-h, d)])
        if id(weights) not in at_point:
            at_point[id(weights)] = dot(weights, f_at([]))
        fp, fm = dot(weights, plus), dot(weights, minus)
        return (fp - fm) / (2 * h), NOISE * size_of(weights, plus) / h, (fp + fm - 2 * at_point[id(weights)]) / h

    def mixed(h: float) -> tuple[float, float, None]:
        c = [f_at([(a, u), (b, w)]) for a, b in ((h, h), (h, -h), (-h, h), (-h, -h))]
        value = (dot(cts, c[0]) - dot(cts, c[1]) - dot(cts, c[2]) + dot(cts, c[3])) / (4 * h * h)
        return value, NOISE * size_of(cts, c[0]) / (h * h), None

    if not any(m.any() for m in moved.values()):
        return [{"what": "u·Jᵀct" if order == 1 else "u·∂x(w·Jᵀct)", "skipped": STILL}]
    if order == 1:
        checks = [_check("u·Jᵀct", device(u, got), lambda h: first(cts, u, h), STEP_1 * size)]
        if diagonal(jaxpr):  # each element's derivative on its own, held relatively
            checks.append(_per_element(np.asarray(got[0]), xs[0], np.asarray(cts[0]), lambda x: evaluate(jaxpr, x)[0]))
        return checks
    n = len(xs)
    w = {i: np.asarray(point.w[i], dtype=np.float64) for i in flo}
    c2 = {j: rng.standard_normal(np.shape(point.ct[j])) for j, m in enumerate(mask) if m}
    weights = [c2.get(j) for j in range(len(mask))]
    return [_check("u·∂x(w·Jᵀct)", device(u, got[:n]), mixed, STEP_2 * size),
            _check("c·(J w)", device(c2, got[n:]), lambda h: first(weights, w, h), STEP_1 * size)]


#: Primitives through which a floating value only chooses: their result is piecewise constant.
CHOOSING = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "is_finite"})
#: Call-like primitives whose sub-jaxpr takes the equation's operands one for one.
_CALLS = ("jaxpr", "call_jaxpr")


def switches(jaxpr: Any) -> set[int]:
    """The inputs of ``jaxpr`` used only through comparisons (``CHOOSING``): a float condition
    of ``jnp.where``. Their derivative is 0 wherever there is one; moving them only switches
    branches, and where both branches are equal at the point (``where(c, x, x)``) a central
    difference cannot see the switch, so finite differences hold them still (JAX's cotangent
    for them is still held against ``jax.vjp``'s)."""
    return {i for i, v in enumerate(jaxpr.jaxpr.invars) if _only_chooses(jaxpr.jaxpr, v)}


def _only_chooses(j: Any, var: Any) -> bool:
    used = False
    for eqn in j.eqns:
        for k, x in enumerate(eqn.invars):
            if x is not var:
                continue
            used = True
            if eqn.primitive.name in CHOOSING:
                continue
            sub = next((eqn.params[p] for p in _CALLS if p in eqn.params), None)
            inner = getattr(sub, "jaxpr", sub)
            if inner is None or not hasattr(inner, "invars") or len(inner.invars) != len(eqn.invars):
                return False
            if not _only_chooses(inner, inner.invars[k]):
                return False
    return used and var not in j.outvars


def directions(xs: Sequence[np.ndarray], jaxpr: Any, rng: np.random.Generator
               ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """(the random direction of each floating input, which of its elements move): zero where
    an element is held still (``steppable``, ``switches``). The same draws whatever is held
    still: a harness without edge values keeps its direction."""
    moved = movable(xs, jaxpr)
    return {i: np.where(m, rng.standard_normal(np.shape(xs[i])), 0.0) for i, m in moved.items()}, moved


def movable(xs: Sequence[Any], jaxpr: Any) -> dict[int, np.ndarray]:
    """Per floating input, which of its elements finite differences move (``steppable``, and
    not an input used only in comparisons: ``switches``); the order-2 point's ``w`` is drawn
    with the same mask (``farm.pipeline.gradients.draw``)."""
    still = switches(jaxpr)
    return {i: steppable(x) & (i not in still) for i, x in enumerate(xs) if _differentiable(x)}


def as_held(x: np.ndarray) -> np.ndarray:
    """A floating input in float64 as the CPU backend that runs every vjp module holds it:
    subnormals are zeros of their sign there (a subnormal ``jnp.where`` condition is false)."""
    x64 = np.asarray(x).astype(np.float64)
    with np.errstate(all="ignore"):
        return np.where(np.abs(x64) < _tiny(np.asarray(x).dtype), np.copysign(0.0, x64), x64)


#: Why a harness's inputs gave finite differences nothing to move.
STILL = ("no input element is finite, within the square root of its dtype's largest value and used other than "
         "in comparisons")


def steppable(x: Any) -> np.ndarray:
    """Which elements of a floating input finite differences move: finite ones, and no larger
    than the square root of the dtype's largest value. NaN and ±inf have no neighbourhood, and
    near the top of the range a function growing like x² overflows the dtype, where the float64
    reference does not (``square`` at 3.4e38: inf against 6.8e38). The elements held still
    are still judged against ``jax.vjp``; edge-value harnesses hold them (``farm.catalog.special``)."""
    import ml_dtypes  # noqa: PLC0415  (loaded by jax already)

    x = np.asarray(x)
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        return np.isfinite(x64) & (np.abs(x64) <= np.sqrt(float(ml_dtypes.finfo(x.dtype).max)))


#: Primitives that map each element to one element of the same shape: a program of these alone,
#: with one input and one output of its shape, has a diagonal Jacobian. Not the staircases
#: (floor, ceil, round, sign): JAX's derivative is 0, and past 2^24 a float64 difference sees
#: the identity.
ELEMENTWISE = frozenset({
    "neg", "abs", "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt",
    "cbrt", "erf", "erfc", "erf_inv", "lgamma", "digamma", "square", "integer_pow", "reciprocal"})


#: The dtypes held element by element. Not float16 and bfloat16: their derivatives overflow in
#: intermediates (integer_pow's x**-4 at 0.05) and lose most digits near poles (digamma) or in
#: cancellations (tanh's 1 - ans**2 at 2.5: 13% in bfloat16) across JAX's own catalog; the
#: directional check still holds them.
PER_ELEMENT_DTYPES = frozenset({"float32", "float64"})


def diagonal(jaxpr: Any) -> bool:
    """One floating input, one output of its shape, and only elementwise unary primitives
    between them: output element i depends on input element i alone."""
    j = jaxpr.jaxpr
    if len(j.invars) != 1 or len(j.outvars) != 1 or j.constvars:
        return False
    a, o = j.invars[0].aval, jaxpr.out_avals[0]
    return (np.dtype(a.dtype).name in PER_ELEMENT_DTYPES and getattr(a, "shape", None) == getattr(o, "shape", None) and a.dtype == o.dtype
            and all(e.primitive.name in ELEMENTWISE and len(e.invars) == 1 for e in j.eqns) and bool(j.eqns))


def _per_element(got: np.ndarray, x: np.ndarray, ct: np.ndarray, f: Any) -> dict[str, Any]:
    """A diagonal Jacobian's every element at once: central differences of the float64 reference
    with a step per element (two steps, extrapolated), each element's cotangent held relatively
    (``tol · |reference|``), so a derivative of 4e-8 that came out 0 is seen beside one of 0.2.
    An element is judged only where the reference's derivative stands clear of its own rounding
    (a derivative under float64's resolution of ``f`` there has no trustworthy reference), and
    where the dtype can hold it (above its smallest normal)."""
    x64 = x.astype(np.float64)
    h = STEP_1 * np.maximum(np.abs(x64), 1.0)
    with np.errstate(all="ignore"):
        def diff(step: np.ndarray) -> np.ndarray:
            return (np.asarray(f(x64 + step), np.float64) - np.asarray(f(x64 - step), np.float64)) / (2 * step)
        coarse, fine = diff(h), diff(h / 2)
        ref = ct * (fine + (fine - coarse) / 3)
        noise = np.abs(ct) * (NOISE * np.abs(np.asarray(f(x64), np.float64)) / (h / 2) + np.abs(fine - coarse))
        tiny = _tiny(got.dtype)
        judged = (np.isfinite(ref) & np.isfinite(coarse) & (np.abs(ref) > 8 * noise) & (np.abs(ref) > tiny)
                  & steppable(x))
    return {"what": "per element", "per_element": True, "reference": ref, "device": got.astype(np.float64),
            "judged": judged, "noise": noise, "tiny": tiny, "inputs": x64, "dtype": got.dtype}


def _elements_wrong(c: dict[str, Any], tol: float) -> tuple[str | None, dict[str, Any]]:
    """The per-element check's verdict: (what is wrong or None, the facts to keep)."""
    ref, dev, judged = c["reference"], c["device"], c["judged"]
    with np.errstate(all="ignore"):  # held as the dtype holds it: past its range, ±inf there too
        ref = ref.astype(c["dtype"]).astype(np.float64)
        bad = judged & ~((np.abs(dev - ref) <= tol * np.abs(ref) + c["noise"] + c["tiny"]) | (dev == ref))
    facts = {"what": c["what"], "elements": int(ref.size), "judged": int(judged.sum()), "wrong": int(bad.sum())}
    if not bad.any():
        return None, facts
    idx = [tuple(int(j) for j in i) for i in np.argwhere(bad)][:3]
    shown = ", ".join(f"x={c['inputs'][i]:.6g}: {dev[i]:.6g} against {ref[i]:.6g}" for i in idx)
    return (f"per element: {int(bad.sum())} of {int(judged.sum())} judged cotangents differ from finite differences "
            f"of the float64 reference by more than {tol:.3g} of it ({shown})"), facts


def _check(what: str, dev: tuple[float, float, float], difference: Any, h: float) -> dict[str, Any]:
    """One directional derivative: the device's (value, Σ|terms|, flush floor) against the
    reference's central difference at steps ``h`` and ``h/2``, extrapolated (Richardson: the
    difference's error is O(h²)), with its own error estimate (the two steps' disagreement
    plus float64 rounding over the step) for the bound. Skipped where the reference is not
    finite within a step (outside a domain), where the two steps disagree by more than the
    value (a jump within both steps makes them differ by half: rem, floor near an integer), or
    where the one-sided differences' spread ``(F(x+h) + F(x-h) - 2F(x)) / h`` does not shrink
    with the step as a smooth function's does (``h·F''``: half at half the step): a kink at the
    point or closer to it than the step (the median of edge values clustered within 1e-38 of
    0), or a value at the point apart from its neighbours, which a central difference alone
    never evaluates; and where the reference is not finite at the point itself (0/0, a pole)."""
    coarse, _, spread_coarse = difference(h)
    fine, noise, spread_fine = difference(h / 2)
    ref = fine + (fine - coarse) / 3
    value, mag, floor = dev
    err = abs(fine - coarse) + noise
    c: dict[str, Any] = {"what": what, "device": value, "reference": ref, "scale": mag, "step": h,
                         "noise": err + floor}
    if not (np.isfinite(coarse) and np.isfinite(fine)):
        c["skipped"] = "the reference is not finite within a step of the point"
    elif abs(fine - coarse) > 0.25 * max(abs(fine), abs(coarse)) and abs(fine - coarse) > 8 * noise:
        c["skipped"] = "the differences at two steps disagree: a jump or a kink within a step"
    elif spread_fine is not None and not (np.isfinite(spread_fine) and np.isfinite(spread_coarse)):
        c["skipped"] = "the reference is not finite at the point itself (0/0, a pole): no derivative there"
    elif spread_fine is not None and not (abs(spread_fine) <= 0.75 * abs(spread_coarse) or abs(spread_fine) <= 8 * noise):
        c["skipped"] = ("the one-sided differences disagree and do not converge with the step: not differentiable "
                        "at the point (a kink, or a value apart from its neighbours)")
        c["spread"] = [spread_coarse, spread_fine]
    return c
