"""Runs the stages for one harness: trace → lower (per platform) → census → export →
serialize → compile → execute → compare → crossexec (and xhost), then judges the
records by the harness's limitations (``farm.judge.limitations``).

This is the one code path every runner uses (Ray actors, standalone workers, the
Bazel/pytest family tests). Isolation from crashes and hangs is the runner's job:
this module runs in whatever process it is given.
"""
from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from farm.stages import compat
from farm.catalog import Harness, known
from farm.cache import key as digest
from farm.cache import recorder
from farm.formats import iofile
from farm.pipeline.artifact import ArtifactJob, run_artifact
from farm.pipeline.compile_cache import compile_execute
from farm.judge import stages as judge_stage
from farm.judge.limitations import judge_record, judge_run
from farm.reference.handwritten import reference_outputs
from farm.pipeline.checks import Job, check
from farm.pipeline.effects import run_effects
from farm.pipeline.pallas import missing_api, run_pallas_kept, run_pallas_prior
from farm.pipeline.features import run_features
from farm.pipeline.gradients import run_gradients
from farm.pipeline.symbolic import run_symbolic
from farm.platforms import native_platform
from farm.results import UPSTREAM_STAGES, Artifact, Options, Outcome, Record, Reuse
from farm.pipeline import meshes
from farm.pipeline.meshes import mesh_context
from farm.stages import census, export, lower, sharding, trace, xhost

# jax is imported inside the functions that use it: see farm.stages (the store imports
# this package, and jax's import costs it ~0.9 s).


def run_harness(h: Harness | ArtifactJob, opts: Options = Options(), prior: xhost.Prior | None = None,
                reuse: Reuse | None = None, options_digest: str | None = None, *,
                catalog_harness: Harness | None = None) -> Outcome:
    """Run every stage for one harness; exceptions inside stages become records.

    A stored artifact (``ArtifactJob``, what a replay schedules) runs the stages from a
    deserialized export on (``farm.pipeline.artifact``), judged by ``catalog_harness``'s
    tolerance and limitations where its harness is still in the catalog.

    ``prior``: another host's serialized export of this harness (with its inputs and
    outputs), run here too and compared three ways (the ``xhost`` stage).
    ``reuse``: an earlier run's downstream records, taken instead of compiling and
    running again only if the exact modules, inputs and compiler are unchanged.
    ``options_digest``: the driver's digest of the sweep options and environment (the
    cache key part it looks results up by); computed here when not given."""
    import jax

    if isinstance(h, ArtifactJob):
        return run_artifact(h, opts, catalog_harness)
    t0 = time.perf_counter()
    opt_d = options_digest or digest.options_digest(opts)
    recording = recorder.RECORDER.begin()  # which of jax's code this harness runs
    try:
        # x64 for a harness that needs it, or everywhere in a process configured with it (farm sweep --config x64=on)
        with compat.enable_x64(h.needs_x64 or bool(jax.config.jax_enable_x64)), compat.jax_config(h.jax_config):
            records, artifacts, dkey = _run(h, opts, prior, reuse, opt_d)
    finally:
        deps = recorder.RECORDER.end() if recording else None
    seconds = time.perf_counter() - t0
    records = judge_run(h, [judge_record(h, r) for r in records])
    deps_key = digest.deps_key(h, opt_d, deps["parts"]) if deps else None
    return Outcome(h.fingerprint, h.name, records, artifacts, seconds, result_key=digest.result_key(h, opt_d),
                   downstream_key=dkey, deps_key=deps_key, deps=recorder.wire(deps) if deps_key else None)


def _run(h: Harness, opts: Options, prior: xhost.Prior | None, reuse: Reuse | None,
         options_digest: str) -> tuple[list[Record], list[Artifact], str | None]:
    """(records, artifacts, downstream key) of the stages in order. The native stages are
    an earlier run's records when ``reuse`` has the downstream key computed here (and no
    other host's artifact is to be run)."""
    have = _device_count()
    if h.pallas and (missing := missing_api(h.pallas.source)):  # an older jax's Pallas: skipped likewise
        return [Record("trace", "any", "skipped", error_type="NotInThisJax", error=missing)], [], None
    if h.needs and (missing := known.lacking(h.needs)):  # an API an older jax lacks: skipped likewise
        return [Record("trace", "any", "skipped", error_type="NotInThisJax", error=missing)], [], None
    if h.mesh and (missing := meshes.missing_api(h, have)):  # an older jax: skipped, never the farm's error
        return [Record("trace", "any", "skipped", error_type="NotInThisJax", error=missing,
                       facts={"devices_needed": h.devices, "devices_here": have})], [], None
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
    if not tr.ok and not (h.poly is not None and "static" not in opts.shapes):  # another jax's kernel artifacts need no trace
        return [_without_handle(tr), *(run_pallas_prior(h, prior.pallas) if prior is not None else [])], [], None
    if "static" not in opts.shapes:  # the symbolic variant alone (a declared one runs whether or not its static twin traces)
        return [_without_handle(tr), *run_symbolic(h, opts.platforms)], [], None
    lowered, lower_recs, module_arts = _lower(tr, opts, h)
    serialized, exported, export_recs, export_arts = _export(tr, tuple(p for p in opts.platforms if lowered[p].ok), h)
    recs = [_without_handle(tr), *lower_recs, *export_recs]
    if "symbolic" in opts.shapes:  # never reused: its stages are upstream ones (farm.results.UPSTREAM_STAGES)
        recs += run_symbolic(h, opts.platforms)
    recs += run_effects(h, tr.handle.dyn, opts.platforms)  # upstream too: never reused
    pallas_recs, pallas_arts = run_pallas_kept(h, tr.handle.dyn, opts)  # upstream too: never reused
    recs += pallas_recs
    if prior is not None and prior.pallas:  # another jax's kernel artifacts (a version sweep's cross run)
        recs += run_pallas_prior(h, prior.pallas)
    if prior is not None and not prior.export:  # it carried kernel artifacts only
        prior = None
    recs += run_features(h, tr.handle.dyn, opts.platforms)  # the same
    if opts.vjp and not abstract:  # upstream too: never reused
        recs += run_gradients(h, tr.handle.jitted, tr.handle.dyn, tr.handle.traced.jaxpr, exported, opts.vjp)
    arts = [*module_arts, *export_arts, *pallas_arts]
    if abstract:
        return recs + _too_big(h, opts), arts, None
    dkey = _downstream_key(h, options_digest, args, lowered, serialized if opts.roundtrip else None)
    if reuse is not None and reuse.key == dkey and prior is None:
        return recs + _reused(reuse), arts, dkey
    job = Job(h, opts, args, tr.handle.dyn, tr.promised, tr.handle.traced.jaxpr)
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
    return judge_stage.sharding(sharding.run(module, platform, h.mesh, h.collective_axes, h.in_specs, hlo,
                        partitioner=h.partitioner or "default",
                        constraints=tuple(zip(h.constraints, meshes.hlo_constraints(h)))))


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
            recs.append(judge_stage.census(census.run(lo.handle.module, p)))
            if h.mesh:
                recs.append(_sharding(h, lo.handle.module, p, tr))
            if opts.keep_modules:
                arts.append(Artifact(lo.module_sha256, "module", lo.handle.text.encode(),
                                     {"platform": p, "stage": "lower"}))
    return lowered, recs, arts


def _export(tr: trace.Traced, platforms: tuple[str, ...], h: Harness
            ) -> tuple[export.Serialized | None, Any, list[Record], list[Artifact]]:
    """(the serialized artifact if its round trip held, the live ``jax.export.Exported`` if the
    export succeeded, records, its artifact): the multi-platform export of the platforms that
    lowered, the serialize round trip, and the census of the artifact."""
    if not platforms:
        return None, None, [], []
    ex, *refused = export.run_all(tr, platforms)
    se = judge_stage.serialize(export.serialize(ex))
    recs = [_without_handle(r) for r in (ex, *refused, se)]
    exported = ex.handle.exported if ex.ok and ex.handle is not None else None
    if se.handle is None:  # no artifact (a "differs" round trip still has one: checked below too)
        return None, exported, recs, []
    art = Artifact(se.artifact, "export", se.handle.blob, {
        "platforms": ex.facts["platforms"], "calling_convention_version": ex.facts["calling_convention_version"],
        "jax_version": jax_version(), "format": "jax.export.serialize"})
    # walk the artifact's own bytecode: printing it to text and parsing that back cost ~18 ms
    module = census.parse_artifact(bytes(ex.handle.exported.mlir_module_serialized))
    recs.append(judge_stage.census(census.run(module, "export"), exported=True))
    if h.mesh:
        recs.append(_sharding(h, module, "export", tr))
    return se, exported, recs, [art]


def _downstream_key(h: Harness, options_digest: str, args: list[Any], lowered: dict[str, lower.Lowered],
                    serialized: export.Serialized | None) -> str:
    """``serialized``: the export artifact where a downstream stage runs it (the round
    trip), else None. Only the round trip does: the multi-platform artifact differs between
    x64 on and off (its platform index is i32 or i64) where every module is the same."""
    modules = {p: lo.module_sha256 if lo.ok else f"{lo.status}:{lo.error_type}:{lo.error}"
               for p, lo in lowered.items()}
    modules["export"] = serialized.artifact if serialized is not None else "not run downstream"
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


def _native(job: Job, lowered: dict[str, lower.Lowered], serialized: export.Serialized | None,
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
        recs += check(job, kind, lo, actual, ref, lowered, serialized, prior)
    return recs, arts


def _io_artifact(dyn: list[Any], outputs: list[np.ndarray] | None) -> Artifact:
    data = iofile.pack(dyn, outputs or [])
    return Artifact(hashlib.sha256(data).hexdigest(), "io", data,
                    {"inputs": len(dyn), "outputs": len(outputs or [])})


def _device_count() -> int:
    """Devices of this process's default backend (tests patch it here)."""
    import jax

    return jax.device_count()


def jax_version() -> str:
    import jax

    return jax.__version__
