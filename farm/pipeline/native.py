"""The native check: compile and execute on each run-on kind, then what is run to judge the
native outputs, and on CPU, what else is run here: another host's artifact (xhost), the
deserialized artifact (round trip) and the other platforms' modules (crossexec). Every
verdict is the judge's (``farm.judge.harness``).

Its records are the ones the result cache may reuse (``CheckSpec.reusable``): an earlier
run's, where the modules, inputs and compiler are unchanged (``farm.pipeline.harness``).
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from farm import judge
from farm.judge import Job, Tolerance
from farm.formats import iofile
from farm.pipeline import apart
from farm.pipeline.check import Base, Produced, Run
from farm.pipeline.compile_cache import compile_execute
from farm.platforms import native_platform
from farm.reference.handwritten import reference_outputs
from farm.results import Artifact, Record, check_spec
from farm.stages import compare, compile as compile_stage, export, lower, xhost
from farm.stages.execute import to_numpy
from farm.stages.record import failure

__all__ = ["CHECK", "Job", "check"]


class NativeCheck(Base):
    """Compile, execute, compare, crossexec and xhost: on the static path, after every upstream check."""

    spec = check_spec("native")

    def applies(self, run: Run) -> bool:
        return run.static

    def run(self, run: Run) -> Produced:
        if run.abstract:
            return too_big(run.h, run.opts.run_on, run.devices_here), []
        job = Job(run.h, run.opts, run.args, run.dyn, run.traced.promised, run.traced.handle.traced.jaxpr)
        return native(job, run.lowered, run.serialized, run.xhost_prior)


CHECK = NativeCheck()


def native(job: Job, lowered: dict[str, lower.Lowered], serialized: export.Serialized | None,
           prior: xhost.Prior | None) -> Produced:
    """(records, io artifacts): compile and execute on each run-on kind, then check the
    outputs (``check``)."""
    recs: list[Record] = []
    arts: list[Artifact] = []
    ref = None
    for kind in job.opts.run_on:
        platform = native_platform(kind)
        lo = lowered.get(platform)
        if lo is None:
            continue
        c, e = compile_execute(lo, job.dyn, job.opts, "compile")
        actual = e.handle.arrays if e.ok else None
        if actual is not None:
            io_art = _io_artifact(job.dyn, actual)
            arts.append(io_art)
            e = e.with_status(e.status, artifact=io_art.sha256)
        recs += [c, e.with_status(e.status, handle=None)]
        if ref is None and job.h.reference is not None:
            try:
                ref = reference_outputs(job.h, job.args)
            except Exception as exc:  # a broken reference is the farm's bug: say so
                recs.append(Record("compare", platform, "error", error_type=type(exc).__name__,
                                   error=f"reference raised: {exc}"[:500]))
        recs += check(job, kind, lo, actual, ref, lowered, serialized, prior)
    return recs, arts


def too_big(h: Any, run_on: tuple[str, ...], have: int) -> list[Record]:
    """Compile and execute records of a mesh larger than this host: not runnable here."""
    why = f"a mesh of {h.devices} devices; this host's default backend has {have}"
    return [Record(stage, native_platform(kind), "not_runnable_here", error_type="TooFewDevices", error=why,
                   facts={"devices_needed": h.devices}) for kind in run_on for stage in ("compile", "execute")]


def _io_artifact(dyn: list[Any], outputs: list[np.ndarray] | None) -> Artifact:
    data = iofile.pack(dyn, outputs or [])
    return Artifact(hashlib.sha256(data).hexdigest(), "io", data,
                    {"inputs": len(dyn), "outputs": len(outputs or [])})


def check(job: Job, kind: str, lo: lower.Lowered, actual: list[np.ndarray] | None,
          ref: list[np.ndarray] | None, lowered: dict[str, lower.Lowered],
          serialized: export.Serialized | None, prior: xhost.Prior | None) -> list[Record]:
    """The native outputs against the reference (or the invariant) and another host's
    artifact; on CPU also the deserialized artifact and the other platforms' modules."""
    native = lo.platform
    tol = judge.tolerance_of(job, native)
    recs: list[Record] = []
    verdict = judge.native(job, native, actual, ref, tol)
    if verdict is not None:
        recs.append(verdict)
    if prior is not None:
        recs.append(judge.another_host(job, xhost.run(prior, native, job.dyn), prior, native, actual, ref, tol))
    if actual is None or kind != "cpu":
        return recs
    if job.opts.roundtrip and serialized is not None:
        recs.append(roundtrip(serialized, job.dyn, actual))
    if job.opts.crossexec:
        for p in job.opts.platforms:
            if p != native and lowered[p].ok:
                recs += crossexec(job, lowered[p], lo, actual, tol)
    return recs


def roundtrip(se: export.Serialized, dyn: list[Any], native: list[np.ndarray]) -> Record:
    """The deserialized artifact, called here, judged against the native run."""
    try:
        out = to_numpy(export.call(se, dyn))
    except Exception as e:
        return failure(compare.Compared, "compare", "export", e, 0.0, facts={"against": "native"})
    return judge.roundtrip(out, native)


def crossexec(job: Job, lo: lower.Lowered, native_lo: lower.Lowered, native: list[np.ndarray],
              tol: Tolerance) -> list[Record]:
    """Run another platform's module on this backend and have its outputs judged.

    A module whose platform-only custom calls (cuSOLVER, hipSPARSE...) have no handler
    here is ``not_runnable_here``, whether the compile or the first run finds out."""
    if lo.module_sha256 == native_lo.module_sha256:
        return [judge.identical(lo.platform, native_lo.platform)]
    ran_apart = apart.aborts(job.h, lo.platform)  # it would take the harness's other records down with it
    if ran_apart:
        c, e, arrays = apart.run(job.h, lo.platform, job.dyn, job.opts)
    else:
        c, e = compile_execute(lo, job.dyn, job.opts, "crossexec")
        arrays = e.handle.arrays if e.ok else None
    if c.status != "ok" or e is None:
        return [c]
    if not e.ok:
        return [compile_stage.not_runnable(e.with_status(e.status, stage="crossexec"))]
    cmp = judge.crossexec(job, lo.platform, native_lo.platform, arrays, native, tol)
    if ran_apart:
        cmp = cmp.with_status(cmp.status, facts={**cmp.facts, "apart": True})
    return [cmp.with_status(cmp.status, seconds=c.seconds + e.seconds,
                            metrics={**cmp.metrics, "compile_s": c.metrics.get("compile_s", 0.0),
                                     "execute_s": e.metrics.get("execute_s", 0.0)})]
