"""The verdicts on one catalog harness's outputs: against its hand-written reference, its
jaxpr evaluated in float64 (``farm.judge.jaxpr``), or its invariant where results are not
unique; another host's artifact (xhost), the deserialized artifact (round trip) and the
other platforms' modules run here (crossexec) by the same rules and the same tolerance
(``farm.judge.tolerance.of_harness``).

The pipeline runs what is judged (``farm.pipeline.native``) and hands the outputs here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.judge.edges import at_edges, nonfinite_alike, twin_at_edges
from farm.judge.outputs import compared
from farm.judge.tolerance import Computation, allowed, declared, of_harness, rtol_atol
from farm.judge.xhost import judge_xhost
from farm.reference.decompositions import size
from farm.reference.handwritten import upcast
from farm.results import SEVERITY, Options, Record
from farm.stages.compare import Compared
from farm.stages.record import failure
from farm.stages.xhost import CrossHost, Prior


@dataclass(frozen=True, slots=True)
class Job:
    """One traced harness, as its native and foreign runs need it."""

    h: Harness
    opts: Options
    args: list[Any]  # every argument, statics included: the reference and invariant take these
    dyn: list[Any]  # the dynamic arguments: what the compiled code is called with
    promised: list[dict[str, Any]] | None  # each output's dtype and shape, as tracing promised
    jaxpr: Any = None  # the traced closed jaxpr over ``dyn``: what the float64 jaxpr reference evaluates


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How outputs on one platform are compared."""

    rtol: float
    atol: float
    exact: bool


def tolerance_of(job: Job, platform: str) -> Tolerance:
    """The harness's tolerance on ``platform`` for its first output's dtype."""
    rtol, atol = rtol_atol(of_harness(job.h, platform, job.promised[0]["dtype"] if job.promised else None))
    return Tolerance(rtol, atol, exact=job.h.compare == "exact")


#: The comparisons of an api function's edge values against its twin (``farm.judge.edges``).
AT_EDGES = ("edges", "edges+jaxpr")


def both(twin: Record, jaxpr: Record) -> Record:
    """Edge values judged both ways: against the twin (NumPy's conventions and findings as data)
    and by the float64 jaxpr (its policy: no absolute band, the sign of a zero). The worse verdict
    stands, the jaxpr's where they are as bad (the harnesses' own limitations name its messages); a
    judge with no answer (``skipped``: no rule) leaves it to the other; the other's verdict is kept
    in the facts."""
    if jaxpr.status == "skipped" or twin.status != "skipped" and SEVERITY[twin.status] > SEVERITY[jaxpr.status]:
        worse, other, by = twin, jaxpr, "twin"
    else:
        worse, other, by = jaxpr, twin, "jaxpr"
    return worse.with_status(worse.status, facts={**worse.facts, "edges": "both", "judged_by": by,
                                                   "other": {"status": other.status, "error": other.error}})


def native(job: Job, platform: str, actual: list[np.ndarray] | None, ref: list[np.ndarray] | None,
           tol: Tolerance) -> Record | None:
    """The native outputs against the harness's invariant, its jaxpr reference or its
    hand-written reference (None: the harness compares nothing and something ran)."""
    h = job.h
    if h.invariant is not None and actual is not None:
        return invariant(h, job.args, actual, platform)
    if h.reference is None and actual is not None and job.jaxpr is not None:
        return jaxpr_verdict(job, platform, actual)
    if h.compare in AT_EDGES and actual is not None and ref is not None:
        rec = twin_at_edges(h, job.args, platform, actual, ref, tol.rtol, tol.atol, tol.exact, job.promised)
        return both(rec, jaxpr_verdict(job, platform, actual)) if h.compare == "edges+jaxpr" and job.jaxpr is not None \
            else rec
    if h.compare != "none" or actual is None:
        return compared(actual, ref, platform=platform, against="reference", rtol=tol.rtol, atol=tol.atol,
                        exact=tol.exact, promised=job.promised)
    return None


def independent(job: Job, platform: str, outs: list[np.ndarray]) -> Record | None:
    """Another platform's module run here, judged like the native run by the jaxpr reference
    (so a non-unique result is checked by its invariant, not against the CPU's choice of
    signs); None where that gives no verdict (then it is compared with the native result)."""
    by_twin = job.h.reference is not None and job.h.compare != "edges+jaxpr"  # both ways: the jaxpr judges each platform
    if by_twin or job.h.invariant is not None or job.jaxpr is None:
        return None
    got = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in outs]
    want = [{"dtype": d["dtype"], "shape": list(d["shape"])} for d in job.promised or []]
    if want and got != want:
        return Compared("crossexec", platform, "fail", error_type="Mismatch",
                        error=f"outputs {got} differ from what tracing promised: {want}",
                        facts={"against": "jaxpr"})
    rec = jaxpr_verdict(job, platform, outs)
    if rec.status == "error" or rec.status == "skipped" and "ill-conditioned" not in (rec.error or ""):
        return None  # no rule, or computed from a non-unique value: compare with the native result
    # an ill-conditioned problem has no verdict against any platform's result either
    return rec.with_status(rec.status, stage="crossexec")


def jaxpr_verdict(job: Job, platform: str, actual: list[np.ndarray]) -> Record:
    """A harness without a hand-written reference (all of JAX's own catalog): its jaxpr
    evaluated in float64 by ``farm.reference``, or the invariant of a non-unique result."""
    from farm.judge.jaxpr import judge_jaxpr  # noqa: PLC0415  (the rules' import, only where needed)

    t0 = time.perf_counter()
    floor = declared(job.h, platform)
    try:
        v = judge_jaxpr(job.jaxpr, job.dyn, actual, floor=floor)
    except Exception as e:  # a broken rule is the farm's bug: say so, never a pass
        return failure(Compared, "compare", platform, e, time.perf_counter() - t0, facts={"against": "jaxpr"})
    against = {"reference": "jaxpr", "invariant": "invariant", "none": "none"}[v.against]
    return Compared("compare", platform, v.status, time.perf_counter() - t0, error=v.error,
                    error_type="Mismatch" if v.status == "fail" else None, metrics=v.metrics,
                    facts={**v.facts, "against": against})


def another_host(job: Job, ran: CrossHost, prior: Prior, platform: str, actual: list[np.ndarray] | None,
          ref: list[np.ndarray] | None, tol: Tolerance) -> Record:
    """Another host's artifact that ran here; non-unique results are judged by the invariant,
    a harness without a reference array by its jaxpr (the same verdict as compare's)."""
    h = job.h
    inv = None if h.invariant is None else (lambda outs: invariant_check(h, job.args, outs, platform))
    by_jaxpr = None
    if h.reference is None and h.invariant is None and job.jaxpr is not None:
        def by_jaxpr(outs: list[np.ndarray]) -> tuple[str, str | None]:
            v = jaxpr_verdict(job, platform, outs)
            return v.status, v.error
    if h.compare in AT_EDGES and actual is not None and ref is not None:
        ref = at_edges(job.h, job.args, actual, ref)[0]
    return judge_xhost(ran, prior, native=actual, reference=ref, rtol=tol.rtol, atol=tol.atol, exact=tol.exact,
                       promised=job.promised, invariant=inv, by_jaxpr=by_jaxpr)


def roundtrip(out: list[np.ndarray], native_out: list[np.ndarray]) -> Record:
    """The deserialized artifact, called here, must equal the native run bit for bit."""
    return compared(out, native_out, platform="export", against="native", rtol=0.0, atol=0.0, exact=True)


def identical(platform: str, native_platform: str) -> Record:
    """Another platform's module is the native one, byte for byte: it runs the same."""
    return Record("crossexec", platform, "ok", facts={"identical_to": native_platform})


def crossexec(job: Job, platform: str, native_platform: str, outs: list[np.ndarray],
              native_out: list[np.ndarray], tol: Tolerance) -> Record:
    """Another platform's module, run on this backend: by the jaxpr reference (and its
    invariants) for a harness without a hand-written reference, by the harness's invariant
    where it has one, else against the native result. Non-unique results are judged by
    invariants: an SVD's signs may differ between two correct lowerings."""
    verdict = independent(job, platform, outs)
    if verdict is not None:
        return verdict
    if job.h.invariant is not None:
        like = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in native_out]
        got = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in outs]
        if got != like:
            return Compared("crossexec", platform, "fail", error_type="Mismatch",
                            error=f"outputs {got} differ in dtype or shape from {native_platform}'s {like}",
                            facts={"against": native_platform})
        return invariant(job.h, job.args, outs, platform, stage="crossexec")
    return compared(outs, nonfinite_alike(job.h, outs, native_out, job.args, tol.rtol, tol.atol),
                    platform=platform, against=native_platform,
                    rtol=tol.rtol, atol=tol.atol, exact=tol.exact, stage="crossexec")


def invariant(h: Harness, args: list[Any], actual: list[np.ndarray], platform: str,
              stage: str = "compare") -> Record:
    """Non-unique results (eig, svd signs, sort ties): check invariants instead."""
    try:
        err, bound = invariant_check(h, args, actual, platform)
        ok = err <= bound
        rtol, atol = rtol_atol(of_harness(h, platform))
        return Compared(stage, platform, "ok" if ok else "fail",
                        error=None if ok else f"invariant error {err:.3g} > {bound:.3g}",
                        error_type=None if ok else "Mismatch",
                        metrics={"invariant_err": err, "invariant_bound": bound},
                        facts={"against": "invariant", "rtol": rtol, "atol": atol})
    except Exception as e:
        return failure(Compared, stage, platform, e, 0.0, facts={"against": "invariant"})


def invariant_check(h: Harness, args: list[Any], outs: list[np.ndarray], platform: str) -> tuple[float, float]:
    """(error, bound) of the harness's invariant on these outputs; the bound is the one every
    invariant is held to (``farm.judge.tolerance``, kind ``invariant``: ten times a declared
    tolerance where that is looser)."""
    dtype = np.asarray(outs[0]).dtype if len(outs) else np.dtype(h.dtype)
    bound = allowed(Computation(dtype, "invariant", terms=size(outs), floor=rtol_atol(of_harness(h, platform))))
    return invariant_error(h, args, outs), float(bound.atol)


def invariant_error(h: Harness, args: list[Any], outs: list[np.ndarray]) -> float:
    """The harness invariant's error for these outputs, computed in float64."""
    with np.errstate(all="ignore"):
        return float(h.invariant(*[upcast(a) for a in args], *outs))
