"""How one harness's outputs are judged, in one place: against its hand-written reference,
its jaxpr evaluated in float64 (``farm.reference``), or its invariant where results are not
unique; another host's artifact (xhost), the deserialized artifact (round trip) and the
other platforms' modules run here (crossexec) by the same rules.

``run_harness`` (``farm.pipeline.harness``) runs the stages and hands each native result to
``check``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.pipeline.compile_cache import compile_execute
from farm.pipeline.references import upcast
from farm.results import Options, Record
from farm.stages import compare, compile as compile_stage, export, lower, xhost
from farm.stages.execute import to_numpy
from farm.stages.record import failure


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


def check(job: Job, kind: str, lo: lower.Lowered, actual: list[np.ndarray] | None,
           ref: list[np.ndarray] | None, lowered: dict[str, lower.Lowered],
           serialized: export.Serialized | None, prior: xhost.Prior | None) -> list[Record]:
    """The native outputs against the reference (or the invariant) and another host's
    artifact; on CPU also the deserialized artifact and the other platforms' modules."""
    h, native = job.h, lo.platform
    rtol, atol = h.tolerance(native, job.promised[0]["dtype"] if job.promised else None)
    tol = Tolerance(rtol, atol, exact=h.compare == "exact")
    recs: list[Record] = []
    if h.invariant is not None and actual is not None:
        recs.append(invariant(h, job.args, actual, native))
    elif h.reference is None and actual is not None and job.jaxpr is not None:
        recs.append(jaxpr_verdict(job, native, actual))
    elif h.compare != "none" or actual is None:
        recs.append(compare.run(actual, ref, platform=native, against="reference", rtol=tol.rtol, atol=tol.atol,
                                exact=tol.exact, promised=job.promised))
    if prior is not None:
        recs.append(xhost_record(job, prior, native, actual, ref, tol))
    if actual is None or kind != "cpu":
        return recs
    if job.opts.roundtrip and serialized is not None:
        recs.append(roundtrip(serialized, job.dyn, actual))
    if job.opts.crossexec:
        for p in job.opts.platforms:
            if p != native and lowered[p].ok:
                recs += crossexec(job, lowered[p], lo, actual, tol)
    return recs


def independent(job: Job, platform: str, outs: list[np.ndarray]) -> Record | None:
    """Another platform's module run here, judged like the native run by the jaxpr reference
    (so a non-unique result is checked by its invariant, not against the CPU's choice of
    signs); None where that gives no verdict (then it is compared with the native result)."""
    if job.h.reference is not None or job.h.invariant is not None or job.jaxpr is None:
        return None
    got = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in outs]
    want = [{"dtype": d["dtype"], "shape": list(d["shape"])} for d in job.promised or []]
    if want and got != want:
        return compare.Compared("crossexec", platform, "fail", error_type="Mismatch",
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
    from farm.reference.verdict import judge  # noqa: PLC0415  (the rules' import, ~0.1 s, only where needed)

    t0 = time.perf_counter()
    floor = declared_tolerance(job.h, platform)
    try:
        v = judge(job.jaxpr, job.dyn, actual, floor=floor)
    except Exception as e:  # a broken rule is the farm's bug: say so, never a pass
        return failure(compare.Compared, "compare", platform, e, time.perf_counter() - t0,
                       facts={"against": "jaxpr"})
    against = {"reference": "jaxpr", "invariant": "invariant", "none": "none"}[v.against]
    return compare.Compared("compare", platform, v.status, time.perf_counter() - t0, error=v.error,
                            error_type="Mismatch" if v.status == "fail" else None, metrics=v.metrics,
                            facts={**v.facts, "against": against})


def declared_tolerance(h: Harness, platform: str) -> tuple[float, float] | None:
    """A tolerance the harness declares for this platform (a limitation's ``tol``), if any."""
    for lim in h.limitations:
        if lim.tol is not None and lim.applies(platform, h.dtype):
            return lim.tol
    return h.tol


def xhost_record(job: Job, prior: xhost.Prior, platform: str, actual: list[np.ndarray] | None,
           ref: list[np.ndarray] | None, tol: Tolerance) -> Record:
    """Another host's artifact run here; non-unique results are judged by the invariant."""
    h = job.h
    invariant = None if h.invariant is None else (lambda outs: invariant_error(h, job.args, outs))
    judge = None
    if h.reference is None and h.invariant is None and job.jaxpr is not None:
        def judge(outs: list[np.ndarray]) -> tuple[str, str | None]:  # the same verdict as compare's
            v = jaxpr_verdict(job, platform, outs)
            return v.status, v.error
    return xhost.run(prior, platform, job.dyn, native=actual, reference=ref, rtol=tol.rtol, atol=tol.atol,
                     exact=tol.exact, promised=job.promised, invariant=invariant, judge=judge)


def roundtrip(se: export.Serialized, dyn: list[Any], native: list[np.ndarray]) -> Record:
    """The deserialized artifact, called here, must equal the native run bit for bit."""
    try:
        out = to_numpy(export.call(se, dyn))
    except Exception as e:
        return failure(compare.Compared, "compare", "export", e, 0.0, facts={"against": "native"})
    return compare.run(out, native, platform="export", against="native", rtol=0.0, atol=0.0, exact=True)


def crossexec(job: Job, lo: lower.Lowered, native_lo: lower.Lowered, native: list[np.ndarray],
               tol: Tolerance) -> list[Record]:
    """Run another platform's module on this backend and judge its outputs: by the jaxpr
    reference (and its invariants) for a harness without a hand-written reference, by the
    harness's invariant where it has one, else against the native result.

    A module whose platform-only custom calls (cuSOLVER, hipSPARSE...) have no handler
    here is ``not_runnable_here``, whether the compile or the first run finds out.
    Non-unique results are judged by invariants: an SVD's signs may differ between two
    correct lowerings."""
    if lo.facts["module_sha256"] == native_lo.facts["module_sha256"]:
        return [Record("crossexec", lo.platform, "ok", facts={"identical_to": native_lo.platform})]
    c, e = compile_execute(lo, job.dyn, job.opts, "crossexec")
    if c.status != "ok":
        return [c]
    if not e.ok:
        return [compile_stage.not_runnable(e.with_status(e.status, stage="crossexec"))]
    outs = e.handle.arrays
    verdict = independent(job, lo.platform, outs)
    if verdict is not None:
        cmp = verdict
    elif job.h.invariant is not None:
        like = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in native]
        got = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in outs]
        if got != like:
            cmp = compare.Compared("crossexec", lo.platform, "fail", error_type="Mismatch",
                                   error=f"outputs {got} differ in dtype or shape from {native_lo.platform}'s {like}",
                                   facts={"against": native_lo.platform})
        else:
            cmp = invariant(job.h, job.args, outs, lo.platform, stage="crossexec")
    else:
        cmp = compare.run(outs, native, platform=lo.platform, against=native_lo.platform,
                          rtol=tol.rtol, atol=tol.atol, exact=tol.exact, stage="crossexec")
    return [cmp.with_status(cmp.status, seconds=c.seconds + e.seconds,
                            metrics={**cmp.metrics, "compile_s": c.metrics.get("compile_s", 0.0),
                                     "execute_s": e.metrics.get("execute_s", 0.0)})]


def invariant(h: Harness, args: list[Any], actual: list[np.ndarray], platform: str,
               stage: str = "compare") -> Record:
    """Non-unique results (eig, svd signs, sort ties): check invariants instead."""
    try:
        err = invariant_error(h, args, actual)
        rtol, atol = h.tolerance(platform)
        ok = err <= max(rtol, atol) * 10
        return compare.Compared(stage, platform, "ok" if ok else "fail",
                                error=None if ok else f"invariant error {err:.3g}",
                                error_type=None if ok else "Mismatch",
                                metrics={"invariant_err": err},
                                facts={"against": "invariant", "rtol": rtol, "atol": atol})
    except Exception as e:
        return failure(compare.Compared, stage, platform, e, 0.0, facts={"against": "invariant"})


def invariant_error(h: Harness, args: list[Any], outs: list[np.ndarray]) -> float:
    """The harness invariant's error for these outputs, computed in float64."""
    with np.errstate(all="ignore"):
        return float(h.invariant(*[upcast(a) for a in args], *outs))
