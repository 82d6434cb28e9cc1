"""Runs one harness: trace, then every check of the registry that applies
(``farm.pipeline.registry``: lowering, symbolic, effects, pallas, gradients..., then the
native one: compile → execute → compare → crossexec and xhost), then judges the records by
the harness's limitations (``farm.judge.limitations``).

This is the one code path every runner uses (Ray actors, standalone workers, the
Bazel/pytest family tests). Isolation from crashes and hangs is the runner's job:
this module runs in whatever process it is given.
"""
from __future__ import annotations

import time

from farm.stages import compat
from farm.catalog import Harness, known
from farm.cache import key as digest
from farm.cache import recorder
from farm.pipeline.artifact import ArtifactJob, run_artifact
from farm.judge import judge_record, judge_run
from farm.pipeline import meshes, registry
from farm.pipeline.check import Run, concerns
from farm.pipeline.lowering import jax_version, without_handle
from farm.pipeline.meshes import mesh_context
from farm.results import Artifact, Options, Outcome, Record, Reuse, upstream_stages
from farm.stages import trace, xhost

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
    """(records, artifacts, downstream key) of the checks in order. What an older jax lacks
    (a check's API, ``Harness.needs``, a mesh's API) is ``skipped`` before anything is traced,
    never the farm's error; a harness needing more devices than this host has is not
    runnable here, unless its mesh can be traced abstractly."""
    have = _device_count()
    for c in registry.CHECKS:
        if concerns(c, h) and (missing := c.lacking(h)) is not None:
            return [Record("trace", "any", "skipped", error_type="NotInThisJax", error=missing)], [], None
    if h.needs and (missing := known.lacking(h.needs)):
        return [Record("trace", "any", "skipped", error_type="NotInThisJax", error=missing)], [], None
    if h.mesh and (missing := meshes.missing_api(h, have)):
        return [Record("trace", "any", "skipped", error_type="NotInThisJax", error=missing,
                       facts={"devices_needed": h.devices, "devices_here": have})], [], None
    if h.mesh:
        with mesh_context(h, have) as abstract:
            return _run_checks(h, opts, prior, reuse, options_digest, abstract, have)
    if h.devices > have:
        return [Record("trace", "any", "not_runnable_here", error_type="TooFewDevices",
                       error=f"needs {h.devices} devices; this host's default backend has {have}",
                       facts={"devices_needed": h.devices, "devices_here": have})], [], None
    return _run_checks(h, opts, prior, reuse, options_digest, False, have)


def _run_checks(h: Harness, opts: Options, prior: xhost.Prior | None, reuse: Reuse | None,
                options_digest: str, abstract: bool, have: int) -> tuple[list[Record], list[Artifact], str | None]:
    """Trace, then every check that applies (``farm.pipeline.registry``): the upstream ones in
    order, then the reusable ones, whose records are an earlier run's where ``reuse`` has the
    downstream key the lowering check computed (and no other host's artifact is to be run).
    ``abstract``: the harness's mesh is larger than this host."""
    args = h.make_args()
    tr = trace.run(h, args, abstract=(lambda dyn: meshes.sharded_args(h, dyn, abstract)) if h.mesh else None)
    run = Run(h, opts, prior, options_digest, abstract, args, tr, have)
    recs: list[Record] = [without_handle(tr)]
    arts: list[Artifact] = []
    for c in registry.upstream():
        if run.asks(c):
            r, a = c.run(run)
            recs += r
            arts += a
    downstream = [c for c in registry.reusable() if run.asks(c)]
    if downstream and reuse is not None and reuse.key == run.downstream_key and run.xhost_prior is None:
        return recs + _reused(reuse), arts, run.downstream_key
    for c in downstream:
        r, a = c.run(run)
        recs += r
        arts += a
    return recs, arts, run.downstream_key


def _reused(reuse: Reuse) -> list[Record]:
    """The earlier run's downstream records, each saying where it came from."""
    out = []
    upstream = upstream_stages()
    for d in reuse.records:
        r = Record.from_dict(d)
        if r.stage in upstream:
            continue
        out.append(r.with_status(r.status, facts={**r.facts, "reused_from": r.facts.get("reused_from", reuse.run)}))
    return out


def _device_count() -> int:
    """Devices of this process's default backend (tests patch it here)."""
    import jax

    return jax.device_count()
