"""Runs the stages for one harness: trace → lower (per platform) → census → export →
serialize → compile → execute → compare → crossexec (and xhost), then judges the
records by the harness's limitations (``farm.pipeline.judge``).

This is the one code path every runner uses (Ray actors, standalone workers, the
Bazel/pytest family tests). Isolation from crashes and hangs is the runner's job:
this module runs in whatever process it is given.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.stages import compat
from farm.catalog import Harness
from farm.pipeline import cachekey as digest
from farm.stages import iofile
from farm.pipeline.compile_cache import compile_execute
from farm.pipeline.judge import judge_record, judge_run
from farm.pipeline.references import reference_outputs, upcast
from farm.platforms import native_platform
from farm.results import UPSTREAM_STAGES, Artifact, Options, Outcome, Record, Reuse
from farm.pipeline import meshes
from farm.pipeline.meshes import mesh_context
from farm.stages import census, compare, compile as compile_stage, export, lower, sharding, trace, xhost
from farm.stages.execute import to_numpy
from farm.stages.record import failure

# jax is imported inside the functions that use it: see farm.stages (the store imports
# this package, and jax's import costs it ~0.9 s).


@dataclass(frozen=True, slots=True)
class _Job:
    """One traced harness, as its native and foreign runs need it."""

    h: Harness
    opts: Options
    args: list[Any]  # every argument, statics included: the reference and invariant take these
    dyn: list[Any]  # the dynamic arguments: what the compiled code is called with
    promised: list[dict[str, Any]] | None  # each output's dtype and shape, as tracing promised
    jaxpr: Any = None  # the traced closed jaxpr over ``dyn``: what the float64 jaxpr reference evaluates


@dataclass(frozen=True, slots=True)
class _Tolerance:
    """How outputs on one platform are compared."""

    rtol: float
    atol: float
    exact: bool


def run_harness(h: Harness, opts: Options = Options(), prior: xhost.Prior | None = None,
                reuse: Reuse | None = None, options_digest: str | None = None) -> Outcome:
    """Run every stage for one harness; exceptions inside stages become records.

    ``prior``: another host's serialized export of this harness (with its inputs and
    outputs), run here too and compared three ways (the ``xhost`` stage).
    ``reuse``: an earlier run's downstream records, taken instead of compiling and
    running again only if the exact modules, inputs and compiler are unchanged.
    ``options_digest``: the driver's digest of the sweep options and environment (the
    cache key part it looks results up by); computed here when not given."""
    import jax

    t0 = time.perf_counter()
    opt_d = options_digest or digest.options_digest(opts)
    # x64 for a harness that needs it, or everywhere in a process configured with it (farm sweep --config x64=on)
    with compat.enable_x64(h.needs_x64 or bool(jax.config.jax_enable_x64)):
        records, artifacts, dkey = _run(h, opts, prior, reuse, opt_d)
    records = judge_run(h, [judge_record(h, r) for r in records])
    return Outcome(h.fingerprint, h.name, records, artifacts, time.perf_counter() - t0,
                   result_key=digest.result_key(h, opt_d), downstream_key=dkey)


def _run(h: Harness, opts: Options, prior: xhost.Prior | None, reuse: Reuse | None,
         options_digest: str) -> tuple[list[Record], list[Artifact], str | None]:
    """(records, artifacts, downstream key) of the stages in order. The native stages are
    an earlier run's records when ``reuse`` has the downstream key computed here (and no
    other host's artifact is to be run)."""
    have = _device_count()
    if h.mesh:
        with mesh_context(h, have) as abstract:
            return _run_traced(h, opts, prior, reuse, options_digest, abstract)
    if h.devices > have:
        return [Record("trace", "any", "not_runnable_here", error_type="TooFewDevices",
                       error=f"needs {h.devices} devices; this host's default backend has {have}",
                       facts={"devices_needed": h.devices, "devices_here": have})], [], None
    return _run_traced(h, opts, prior, reuse, options_digest, abstract=False)


def _run_traced(h: Harness, opts: Options, prior: xhost.Prior | None, reuse: Reuse | None,
                options_digest: str, abstract: bool) -> tuple[list[Record], list[Artifact], str | None]:
    """The stages from trace on; ``abstract``: the harness's mesh is larger than this host
    (trace, lower, export and the structural checks only: nothing compiles or runs)."""
    args = h.make_args()
    tr = trace.run(h, args, abstract=(lambda dyn: meshes.sharded_args(h, dyn, abstract)) if h.mesh else None)
    if not tr.ok:
        return [_without_handle(tr)], [], None
    lowered, lower_recs, module_arts = _lower(tr, opts, h)
    serialized, export_recs, export_arts = _export(tr, tuple(p for p in opts.platforms if lowered[p].ok), h)
    recs = [_without_handle(tr), *lower_recs, *export_recs]
    arts = [*module_arts, *export_arts]
    if abstract:
        return recs + _too_big(h, opts), arts, None
    dkey = _downstream_key(h, options_digest, args, lowered, serialized)
    if reuse is not None and reuse.key == dkey and prior is None:
        return recs + _reused(reuse), arts, dkey
    job = _Job(h, opts, args, tr.handle.dyn, tr.facts.get("outputs"), tr.handle.traced.jaxpr)
    native_recs, io_arts = _native(job, lowered, serialized, prior)
    return recs + native_recs, arts + io_arts, dkey


def _without_handle(rec: Record) -> Record:
    """A record as it is kept: without the live JAX objects it carried to the next stage."""
    return rec.with_status(rec.status, handle=None)


def _too_big(h: Harness, opts: Options) -> list[Record]:
    """Compile and execute records of a mesh larger than this host: not runnable here."""
    why = f"a mesh of {h.devices} devices; this host's default backend has {_device_count()}"
    return [Record(stage, native_platform(kind), "not_runnable_here", error_type="TooFewDevices", error=why,
                   facts={"devices_needed": h.devices}) for kind in opts.run_on for stage in ("compile", "execute")]


def _sharding(h: Harness, module: Any, platform: str, tr: trace.Traced) -> Record:
    """The structural check of a sharded module against the harness's mesh."""
    hlo = meshes.hlo_specs(h, tr.handle.dyn)
    return sharding.run(module, platform, h.mesh, h.collective_axes, h.in_specs, hlo,
                        partitioner=h.partitioner or "default",
                        constraints=tuple(zip(h.constraints, meshes.hlo_constraints(h))))


def _lower(tr: trace.Traced, opts: Options, h: Harness) -> tuple[dict[str, lower.Lowered], list[Record], list[Artifact]]:
    """(lowered per platform, records, module artifacts): each platform's lowering and the
    census of its module (and, for a sharded harness, its structural check), whose text is
    kept as an artifact unless told not to."""
    lowered: dict[str, lower.Lowered] = {}
    recs: list[Record] = []
    arts: list[Artifact] = []
    for p in opts.platforms:
        lo = lower.run(tr, p)
        lowered[p] = lo
        recs.append(_without_handle(lo))
        if lo.ok:
            recs.append(census.run(lo.handle.module, p))
            if h.mesh:
                recs.append(_sharding(h, lo.handle.module, p, tr))
            if opts.keep_modules:
                arts.append(Artifact(lo.facts["module_sha256"], "module", lo.handle.text.encode(),
                                     {"platform": p, "stage": "lower"}))
    return lowered, recs, arts


def _export(tr: trace.Traced, platforms: tuple[str, ...], h: Harness
            ) -> tuple[export.Serialized | None, list[Record], list[Artifact]]:
    """(the serialized artifact if its round trip held, records, its artifact): the
    multi-platform export of the platforms that lowered, the serialize round trip, and
    the census of the artifact."""
    if not platforms:
        return None, [], []
    ex, *refused = export.run_all(tr, platforms)
    se = export.serialize(ex)
    recs = [_without_handle(r) for r in (ex, *refused, se)]
    if se.handle is None:  # no artifact (a "differs" round trip still has one: checked below too)
        return None, recs, []
    art = Artifact(se.artifact, "export", se.handle.blob, {
        "platforms": ex.facts["platforms"], "calling_convention_version": ex.facts["calling_convention_version"],
        "jax_version": jax_version(), "format": "jax.export.serialize"})
    # walk the artifact's own bytecode: printing it to text and parsing that back cost ~18 ms
    module = census.parse_artifact(bytes(ex.handle.exported.mlir_module_serialized))
    recs.append(census.run(module, "export", exported=True))
    if h.mesh:
        recs.append(_sharding(h, module, "export", tr))
    return se, recs, [art]


def _downstream_key(h: Harness, options_digest: str, args: list[Any], lowered: dict[str, lower.Lowered],
                    serialized: export.Serialized | None) -> str:
    modules = {p: lo.facts["module_sha256"] if lo.ok else f"{lo.status}:{lo.error_type}:{lo.error}"
               for p, lo in lowered.items()}
    modules["export"] = serialized.artifact if serialized is not None else "none"
    return digest.downstream_key(h, options_digest, modules, digest.inputs_digest(args))


def _reused(reuse: Reuse) -> list[Record]:
    """The earlier run's downstream records, each saying where it came from."""
    out = []
    for d in reuse.records:
        r = Record.from_dict(d)
        if r.stage in UPSTREAM_STAGES:
            continue
        out.append(r.with_status(r.status, facts={**r.facts, "reused_from": r.facts.get("reused_from", reuse.run)}))
    return out


def _native(job: _Job, lowered: dict[str, lower.Lowered], serialized: export.Serialized | None,
            prior: xhost.Prior | None) -> tuple[list[Record], list[Artifact]]:
    """(records, io artifacts): compile and execute on each run-on kind, then check the
    outputs (``_check``)."""
    recs: list[Record] = []
    arts: list[Artifact] = []
    ref = None
    for kind in job.opts.run_on:
        native = native_platform(kind)
        lo = lowered.get(native)
        if lo is None:
            continue
        c, e = compile_execute(lo, job.dyn, job.opts, "compile")
        actual = e.handle.arrays if e.ok else None
        if actual is not None:
            io_art = _io_artifact(job.dyn, actual)
            arts.append(io_art)
            e = e.with_status(e.status, artifact=io_art.sha256)
        recs += [c, _without_handle(e)]
        if ref is None and job.h.reference is not None:
            try:
                ref = reference_outputs(job.h, job.args)
            except Exception as exc:  # a broken reference is the farm's bug: say so
                recs.append(Record("compare", native, "error", error_type=type(exc).__name__,
                                   error=f"reference raised: {exc}"[:500]))
        recs += _check(job, kind, lo, actual, ref, lowered, serialized, prior)
    return recs, arts


def _check(job: _Job, kind: str, lo: lower.Lowered, actual: list[np.ndarray] | None,
           ref: list[np.ndarray] | None, lowered: dict[str, lower.Lowered],
           serialized: export.Serialized | None, prior: xhost.Prior | None) -> list[Record]:
    """The native outputs against the reference (or the invariant) and another host's
    artifact; on CPU also the deserialized artifact and the other platforms' modules."""
    h, native = job.h, lo.platform
    rtol, atol = h.tolerance(native, job.promised[0]["dtype"] if job.promised else None)
    tol = _Tolerance(rtol, atol, exact=h.compare == "exact")
    recs: list[Record] = []
    if h.invariant is not None and actual is not None:
        recs.append(_invariant(h, job.args, actual, native))
    elif h.reference is None and actual is not None and job.jaxpr is not None:
        recs.append(_jaxpr_verdict(job, native, actual))
    elif h.compare != "none" or actual is None:
        recs.append(compare.run(actual, ref, platform=native, against="reference", rtol=tol.rtol, atol=tol.atol,
                                exact=tol.exact, promised=job.promised))
    if prior is not None:
        recs.append(_xhost(job, prior, native, actual, ref, tol))
    if actual is None or kind != "cpu":
        return recs
    if job.opts.roundtrip and serialized is not None:
        recs.append(_roundtrip(serialized, job.dyn, actual))
    if job.opts.crossexec:
        for p in job.opts.platforms:
            if p != native and lowered[p].ok:
                recs += _crossexec(job, lowered[p], lo, actual, tol)
    return recs


def _independent(job: _Job, platform: str, outs: list[np.ndarray]) -> Record | None:
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
    rec = _jaxpr_verdict(job, platform, outs)
    if rec.status == "error" or rec.status == "skipped" and "ill-conditioned" not in (rec.error or ""):
        return None  # no rule, or computed from a non-unique value: compare with the native result
    # an ill-conditioned problem has no verdict against any platform's result either
    return rec.with_status(rec.status, stage="crossexec")


def _jaxpr_verdict(job: _Job, platform: str, actual: list[np.ndarray]) -> Record:
    """A harness without a hand-written reference (all of JAX's own catalog): its jaxpr
    evaluated in float64 by ``farm.reference``, or the invariant of a non-unique result."""
    from farm.reference.verdict import judge  # noqa: PLC0415  (the rules' import, ~0.1 s, only where needed)

    t0 = time.perf_counter()
    floor = _declared_tolerance(job.h, platform)
    try:
        v = judge(job.jaxpr, job.dyn, actual, floor=floor)
    except Exception as e:  # a broken rule is the farm's bug: say so, never a pass
        return failure(compare.Compared, "compare", platform, e, time.perf_counter() - t0,
                       facts={"against": "jaxpr"})
    against = {"reference": "jaxpr", "invariant": "invariant", "none": "none"}[v.against]
    return compare.Compared("compare", platform, v.status, time.perf_counter() - t0, error=v.error,
                            error_type="Mismatch" if v.status == "fail" else None, metrics=v.metrics,
                            facts={**v.facts, "against": against})


def _declared_tolerance(h: Harness, platform: str) -> tuple[float, float] | None:
    """A tolerance the harness declares for this platform (a limitation's ``tol``), if any."""
    for lim in h.limitations:
        if lim.tol is not None and lim.applies(platform, h.dtype):
            return lim.tol
    return h.tol


def _io_artifact(dyn: list[Any], outputs: list[np.ndarray] | None) -> Artifact:
    data = iofile.pack(dyn, outputs or [])
    return Artifact(hashlib.sha256(data).hexdigest(), "io", data,
                    {"inputs": len(dyn), "outputs": len(outputs or [])})


def _xhost(job: _Job, prior: xhost.Prior, platform: str, actual: list[np.ndarray] | None,
           ref: list[np.ndarray] | None, tol: _Tolerance) -> Record:
    """Another host's artifact run here; non-unique results are judged by the invariant."""
    h = job.h
    invariant = None if h.invariant is None else (lambda outs: _invariant_error(h, job.args, outs))
    judge = None
    if h.reference is None and h.invariant is None and job.jaxpr is not None:
        def judge(outs: list[np.ndarray]) -> tuple[str, str | None]:  # the same verdict as compare's
            v = _jaxpr_verdict(job, platform, outs)
            return v.status, v.error
    return xhost.run(prior, platform, job.dyn, native=actual, reference=ref, rtol=tol.rtol, atol=tol.atol,
                     exact=tol.exact, promised=job.promised, invariant=invariant, judge=judge)


def _roundtrip(se: export.Serialized, dyn: list[Any], native: list[np.ndarray]) -> Record:
    """The deserialized artifact, called here, must equal the native run bit for bit."""
    try:
        out = to_numpy(export.call(se, dyn))
    except Exception as e:
        return failure(compare.Compared, "compare", "export", e, 0.0, facts={"against": "native"})
    return compare.run(out, native, platform="export", against="native", rtol=0.0, atol=0.0, exact=True)


def _crossexec(job: _Job, lo: lower.Lowered, native_lo: lower.Lowered, native: list[np.ndarray],
               tol: _Tolerance) -> list[Record]:
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
    verdict = _independent(job, lo.platform, outs)
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
            cmp = _invariant(job.h, job.args, outs, lo.platform, stage="crossexec")
    else:
        cmp = compare.run(outs, native, platform=lo.platform, against=native_lo.platform,
                          rtol=tol.rtol, atol=tol.atol, exact=tol.exact, stage="crossexec")
    return [cmp.with_status(cmp.status, seconds=c.seconds + e.seconds,
                            metrics={**cmp.metrics, "compile_s": c.metrics.get("compile_s", 0.0),
                                     "execute_s": e.metrics.get("execute_s", 0.0)})]


def _invariant(h: Harness, args: list[Any], actual: list[np.ndarray], platform: str,
               stage: str = "compare") -> Record:
    """Non-unique results (eig, svd signs, sort ties): check invariants instead."""
    try:
        err = _invariant_error(h, args, actual)
        rtol, atol = h.tolerance(platform)
        ok = err <= max(rtol, atol) * 10
        return compare.Compared(stage, platform, "ok" if ok else "fail",
                                error=None if ok else f"invariant error {err:.3g}",
                                error_type=None if ok else "Mismatch",
                                metrics={"invariant_err": err},
                                facts={"against": "invariant", "rtol": rtol, "atol": atol})
    except Exception as e:
        return failure(compare.Compared, stage, platform, e, 0.0, facts={"against": "invariant"})


def _invariant_error(h: Harness, args: list[Any], outs: list[np.ndarray]) -> float:
    """The harness invariant's error for these outputs, computed in float64."""
    with np.errstate(all="ignore"):
        return float(h.invariant(*[upcast(a) for a in args], *outs))


def _device_count() -> int:
    """Devices of this process's default backend (tests patch it here)."""
    import jax

    return jax.device_count()


def jax_version() -> str:
    import jax

    return jax.__version__
