"""The verdict on a symbolic artifact's calls: at each concrete size, the outputs against
the float64 reference of the same computation (``farm.judge.jaxpr``: values, or the invariants
of non-unique ones), and, only where the reference gives no answer, against the static
lowering of it at that size, under the harness's tolerance; and a round trip that changed the
artifact's signature. The static lowering is compiled only then (issue 42's decision: it cost
a second function in every call's program, and judged nothing the reference had not).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.judge.edges import nonfinite_alike
from farm.judge.jaxpr import Verdict, judge_jaxpr
from farm.judge.kernel import disagree
from farm.judge.outputs import compare_outputs
from farm.judge.tolerance import Computation, allowed, declared, of_harness, rtol_atol
from farm.catalog import Limitation
from farm.results import SEVERITY, Record
from farm.stages.compile import checked_call
from farm.stages.record import failure
from farm.stages.variants import label
from farm.stages.symbolic import SHAPE_ASSERTION, SymbolicCall, Variant


#: JAX's own gaps in symbolic export, as data: the failure each one explains.
KNOWN_GAPS = (
    Limitation("jax.export serialization drops the symbolic constraints (jax/_src/export/serialization.py: "
               "'TODO(necula): serialize the constraints'): a deserialized artifact called at sizes that break "
               "one is not stopped by JAX's check of the arguments, and shape refinement fails first",
               stage="symbolic_call", status="fail", error=r"breaks the constraints .*Error refining shapes"),
)


def serialize(rec: Record) -> Record:
    """A deserialized symbolic artifact whose signature changed is ``fail``."""
    if rec.status != "ok" or not rec.facts.get("changed"):
        return rec
    return rec.with_status("fail", error="the deserialized symbolic artifact's avals differ from the exported one's")


def calls(rec: SymbolicCall, v: Variant, statics: dict[str, list[Any]] | None = None) -> SymbolicCall:
    """Each size's outputs against the reference, and against the static lowering at that size
    where the reference gives no answer (``statics``: the static lowering's outputs by size,
    filled on first need and reused across the platforms' calls of one variant)."""
    import jax

    if rec.status != "ok":
        return rec
    try:
        return _calls(rec, v, {} if statics is None else statics)
    except Exception as e:  # the static lowering or the reference at a size raised: say so, never lose the outcome
        return failure(SymbolicCall, "symbolic_call", rec.platform, e, rec.seconds,
                       facts={**rec.facts, "raised_while": "judging against the static lowering and the reference"})


def _within_band(outs: list[np.ndarray], static: list[np.ndarray], policy: dict[str, Any] | None) -> bool:
    """An accumulation (a dot, a conv, a reduction) the reference judged by the max-norm: the
    symbolic module and the static lowering are two roundings of it (another platform's
    lowering may sum in another order), each within the reference's band of the true value,
    so within twice that band of each other, measured the same way: every element within
    twice the band times the static lowering's max-norm (``farm.judge.kernel``), of its
    finite elements (``tolerance`` of the policy's computation, two roundings)."""
    if not policy or not str(policy.get("norm", "")).startswith("max-norm") or len(outs) != len(static):
        return False
    for o, s in zip(outs, static):
        o, s = np.asarray(o), np.asarray(s)
        if o.shape != s.shape or s.dtype.kind not in "fc":
            return False
        finite = s[np.isfinite(s)]  # NaN or an infinity matches only itself, and makes no norm
        norm = np.max(np.abs(finite.astype(np.complex128)), initial=0.0)
        if disagree(o, s, allowed(Computation(policy["dtype"], policy["kind"], magnitude=norm, roundings=2)),
                    dtype=s.dtype).any():
            return False
    return True


def _reference(v: Variant, n: str, rows: list[np.ndarray], outs: list[np.ndarray],
               floor: tuple[float, float] | None) -> Verdict:
    """``judge_jaxpr`` of the outputs at point ``n``; the jaxpr traced once per point, and the
    verdict made once for outputs several platforms' calls share (the very same arrays, a
    module with no platform branch) under the same tolerance floor: another array, or another
    floor, is judged on its own."""
    import jax

    jaxpr = v.judged.get(("jaxpr", n))
    if jaxpr is None:
        jaxpr = v.judged[("jaxpr", n)] = jax.make_jaxpr(v.fun)(*rows)
    seen = v.judged.get(("verdict", n, floor))
    if seen is not None and seen[0] is outs:
        return seen[1]
    verdict = judge_jaxpr(jaxpr, rows, outs, floor=floor)
    v.judged[("verdict", n, floor)] = (outs, verdict)
    return verdict


def by_static(h: Any) -> bool:
    """Whether ``h``'s symbolic calls are held against the static lowering at each size instead of
    the float64 jaxpr: an edge-value harness, judged by its twin at its own sizes (``compare="edges"``:
    the jaxpr's float64 evaluation is JAX's own algorithm at those values, and the twin's conventions
    and findings are data of that stage), and a sampler (family ``random``: judged by its distribution,
    its bits at a key are its algorithm's; the float64 evaluation of a sampling loop, multinomial's,
    outlasts the harness's time limit). Either way the symbolic module must compute what the static
    lowering does."""
    return h.compare == "edges" or h.family == "random"  # judged both ways (edges+jaxpr): the jaxpr judges its calls


#: The reference's "no answer", for a harness the float64 reference does not judge (edge values).
_STATIC_ONLY = Verdict("skipped", "none", "judged against the static lowering at each size (by_static)")


def _calls(rec: SymbolicCall, v: Variant, statics: dict[str, list[Any]]) -> SymbolicCall:
    import jax

    h, platform = v.harness, rec.platform
    worst, first, per_size = "ok", None, {}
    points = {label(p): p for p in v.points}
    for n, outs in rec.handle.items():
        rows = v.rows(points[n])
        verdicts = {}
        ref = _STATIC_ONLY if by_static(h) else _reference(v, n, rows, outs, declared(h, platform))
        if ref.status != "skipped":
            verdicts["reference"] = (ref.status, ref.error)
        if ref.facts.get("unspecified_elements"):  # cholesky_p's upper triangle: the static lowering's is no answer
            verdicts["static"] = ("skipped", "a result with an unspecified part: judged by the reference alone")
        elif ref.status == "skipped" and "condition_number" in ref.metrics:
            # another platform's algorithm (tpu's blocked cholesky against LAPACK) on a problem so
            # ill-conditioned that the reference's own tolerance means nothing: nor does the
            # static lowering's, which is the CPU's algorithm
            verdicts["static"] = ("skipped", ref.error)
        elif ref.status == "skipped":  # no answer from the reference: the static lowering at this size is one
            if n not in statics:  # compiled as the calls are, once per size for every platform's call
                statics[n] = [np.asarray(o) for o in jax.tree.leaves(checked_call(v.fun, *rows))]
            static = statics[n]
            rtol, atol = rtol_atol(of_harness(h, platform, str(static[0].dtype) if static else None))
            # edge rows and matrices: where the answer is not unique, each platform's algorithm's own
            static = nonfinite_alike(h, outs, static, list(rows), rtol, atol)
            st, err, _ = compare_outputs(outs, static, rtol, atol, h.compare == "exact",
                                         [{"dtype": str(s.dtype), "shape": list(s.shape)} for s in static])
            if st == "fail" and _within_band(outs, static, ref.facts.get("policy")):
                st, err = "ok", None
            verdicts["static"] = (st, err)
        per_size[str(n)] = {k: s for k, (s, _) in verdicts.items()}
        for against, (s, e) in verdicts.items():
            if s != "skipped" and SEVERITY[s] > SEVERITY[worst]:
                worst, first = s, f"{n}, vs the {against}: {e}"
    for n, err in rec.facts.get("raised", {}).items():
        try:
            jax.jit(v.fun).lower(*v.rows(points[n]))
        except Exception as e:  # the computation itself is not defined at that size: raising is right
            per_size[n] = {"static": f"undefined: {type(e).__name__}"}
            continue
        if SEVERITY["error"] > SEVERITY[worst]:
            worst, first = "error", f"{n}: the call raised where the static lowering runs: {err}"
    facts = {**rec.facts, "verdicts": per_size}
    for n, err in rec.facts.get("violations", {}).items():
        if err is None or not SHAPE_ASSERTION.search(err):
            why = f"{n} breaks the constraints {', '.join(v.constraints)}, but the call " + (
                "returned" if err is None else f"raised something other than a shape assertion: {err}")
            gap = next((g for g in KNOWN_GAPS if rec.facts.get("artifact") == "deserialized"
                        and g.expects("fail", "Mismatch", why)), None)
            if worst == "ok" and gap is not None:  # only the known gap: a wrong value still fails
                return rec.with_status("expected_fail", error=why[:1000], error_type="Mismatch",
                                       facts={**facts, "limitation": gap.description}, handle=None)
            worst, first = "fail", why
            break
    if worst == "ok":
        return rec.with_status("ok", facts=facts, handle=None)
    return rec.with_status(worst, error=(first or "")[:1000], error_type="Mismatch", facts=facts, handle=None)

