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

from farm.catalog import DEFAULT_TOL, Harness
from farm.pipeline.compile_cache import compile_execute
from farm.pipeline.references import upcast
from farm.reference.decompositions import DECOMPOSITIONS, distance, size
from farm.reference.tolerance import invariant_limit
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
    invariant = None if h.invariant is None else (lambda outs: invariant_check(h, job.args, outs, platform))
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
        err, bound = invariant_check(h, args, actual, platform)
        ok = err <= bound
        rtol, atol = h.tolerance(platform)
        return compare.Compared(stage, platform, "ok" if ok else "fail",
                                error=None if ok else f"invariant error {err:.3g} > {bound:.3g}",
                                error_type=None if ok else "Mismatch",
                                metrics={"invariant_err": err, "invariant_bound": bound},
                                facts={"against": "invariant", "rtol": rtol, "atol": atol})
    except Exception as e:
        return failure(compare.Compared, stage, platform, e, 0.0, facts={"against": "invariant"})


def invariant_check(h: Harness, args: list[Any], outs: list[np.ndarray], platform: str) -> tuple[float, float]:
    """(error, bound) of the harness's invariant on these outputs; the bound is the one every
    invariant is held to (``farm.reference.tolerance.invariant_limit``)."""
    dtype = np.asarray(outs[0]).dtype if len(outs) else np.dtype(h.dtype)
    return invariant_error(h, args, outs), invariant_limit(dtype, size(outs), h.tolerance(platform))


def invariant_error(h: Harness, args: list[Any], outs: list[np.ndarray]) -> float:
    """The harness invariant's error for these outputs, computed in float64."""
    with np.errstate(all="ignore"):
        return float(h.invariant(*[upcast(a) for a in args], *outs))


#: How a stored artifact's outputs were judged (``facts["judged"]`` of its compare record).
JUDGED = ("exact", "tolerance", "invariant", "none")
#: What a stored artifact's replayed outputs are compared with (``facts["against"]``).
STORED = "stored"


def stored_tolerance(expected: list[np.ndarray], h: Harness | None, platform: str,
                     dtype: str | None = None) -> tuple[float, float]:
    """(rtol, atol) for a stored artifact's outputs, by the catalog's policy for its first
    output's dtype: its harness's own where it is still in the catalog, else the defaults."""
    first = str(np.asarray(expected[0]).dtype) if len(expected) else dtype
    if h is not None:
        return h.tolerance(platform, first)
    return DEFAULT_TOL.get(first or "", (0.0, 0.0))


def stored(actual: list[np.ndarray], expected: list[np.ndarray], *, primitive: str, platform: str,
           tol: tuple[float, float]) -> compare.Compared:
    """A replayed artifact's outputs against the outputs stored with it: exact first; a
    changed signature fails; then within ``tol``; then, for a decomposition, by the operand
    both output sets describe, held to the one invariant bound."""
    promised = [{"dtype": str(np.asarray(e).dtype), "shape": list(np.shape(e))} for e in expected]
    exact = compare.run(actual, expected, platform=platform, against=STORED, rtol=0.0, atol=0.0, exact=True,
                        promised=promised)
    if exact.status != "fail":
        return _judged(exact, "exact", None)
    if len(actual) != len(expected) or [(np.shape(a), np.asarray(a).dtype) for a in actual] != \
            [(np.shape(e), np.asarray(e).dtype) for e in expected]:
        return _judged(exact, "exact", "signature")
    close = compare.run(actual, expected, platform=platform, against=STORED, rtol=tol[0], atol=tol[1], exact=False)
    if close.status != "fail":
        return _judged(close, "tolerance", "within_tolerance" if close.status == "ok" else None)
    if primitive not in DECOMPOSITIONS:
        return _judged(close, "tolerance", "mismatch")
    err = distance(primitive, actual, expected)
    if err is None:
        return _judged(close, "tolerance", "non_unique_no_invariant")
    bound = invariant_limit(np.asarray(expected[0]).dtype, size(expected), tol)
    metrics = {**close.metrics, "invariant_err": err, "invariant_bound": bound}
    if err <= bound:
        return _judged(close.with_status("ok", error=None, error_type=None, metrics=metrics), "invariant", "non_unique")
    return _judged(close.with_status("fail", metrics=metrics, error=f"{primitive}: invariant error {err:.3g} > "
                                                                      f"{bound:.3g} (outputs also differ: {close.error})"),
                   "invariant", "non_unique_mismatch")


def _judged(rec: compare.Compared, judged: str, reason: str | None) -> compare.Compared:
    return rec.with_status(rec.status, facts={**rec.facts, "judged": judged, "reason": reason})
