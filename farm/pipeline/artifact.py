"""A stored artifact as a job for the pipeline: the serialize stage run backwards, then the
same compile, execute and compare stages a harness goes through, judged by the same
verdicts (``farm.judge.stored``) and limitations, in the same workers.

``ArtifactJob`` is what a replay hands the scheduler instead of a harness (it carries the
bytes: a worker needs no store); ``run_artifact`` is the sequence, reached through
``run_harness`` like every other job.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from farm.catalog import Harness
from farm.judge import (
    STORED, compared, invariant_check, judge_record, judge_run, judge_xhost, of_harness, of_stored, replayed,
    rtol_atol,
)
from farm.platforms import native_platform
from farm.results import Options, Outcome, Record
from farm.stages import compat, deserialize, execute, trace, xhost
from farm.stages.export import needs_x64
from farm.stages.record import Timer, failure
from farm.stages.stored import FORMAT_JAX_EXPORT

#: The stages an artifact job runs, in order (names from ``farm.results.STAGES``).
ARTIFACT_STAGES = ("serialize", "compile", "execute", "compare")


@dataclass(frozen=True)
class ArtifactJob:
    """One stored export to run: its bytes (verified by the store that read them), meta and
    facts, and the harness it was made from (``fingerprint``: the outcome is filed under it;
    the catalog harness of that fingerprint, where there still is one, lends its tolerance
    and limitations). ``today``: also run today's jit of that harness beside it (xhost)."""

    fingerprint: str
    name: str
    primitive: str
    dtype: str | None
    export_sha: str
    blob: bytes = field(repr=False)
    io_sha: str | None
    io: bytes | None = field(repr=False)
    meta: Mapping[str, Any]
    facts: Mapping[str, Any]
    today: bool = False
    catalog: str | None = None  # the catalog its harness came from; None: none the farm loads
    timeout_s: float | None = None

    # what the scheduler orders and judges crashes by, as for a harness
    family = "replay"
    limitations = ()
    travels = True  # sent to the worker whole (``cluster.Worker.run``): no catalog there has it

    @property
    def group(self) -> str:
        return self.primitive

    @property
    def harness_fingerprint(self) -> str:
        """The harness's own fingerprint (``fingerprint`` may carry a ``#n`` job suffix)."""
        return self.fingerprint.split("#", 1)[0]


def run_artifact(job: ArtifactJob, opts: Options = Options(), h: Harness | None = None) -> Outcome:
    """serialize (backwards) → compile → execute → compare for one stored export, judged by
    ``h``'s limitations when its harness is still in the catalog; records without handles.
    A failure is a record, never an exception."""
    import jax

    t0 = time.perf_counter()
    platform = native_platform(jax.default_backend())
    records = _stages(job, opts, h, platform, jax.device_count())
    if job.today and h is not None and any(r.stage == "execute" and r.ok for r in records):
        loaded = next(r.handle for r in records if r.stage == "serialize")
        extra = against_today(h, loaded, platform)
        if extra is not None:
            records.append(extra)
    if h is not None:
        records = judge_stored(h, records)
    return Outcome(job.fingerprint, job.name, [r.with_status(r.status, handle=None) for r in records], (),
                   time.perf_counter() - t0)


def _stages(job: ArtifactJob, opts: Options, h: Harness | None, platform: str, n_devices: int) -> list[Record]:
    ser = deserialize.read(job.blob, job.io, job.meta, job.facts, export_sha=job.export_sha, io_sha=job.io_sha)
    if ser.status != "ok":
        return [ser]
    loaded: deserialize.Loaded = ser.handle
    exp = loaded.exported
    with compat.enable_x64(needs_x64([*exp.in_avals, *exp.out_avals])):
        comp = deserialize.compile_exported(loaded, platform, n_devices)
        ex = deserialize.with_reason(execute.run(comp, loaded.inputs, warmup=opts.warmup, repeats=opts.repeats))
    if ex.ok:
        cmp = replayed(ex.handle.arrays, loaded.expected, primitive=job.primitive, platform=platform,
                       tol=rtol_atol(of_stored(loaded.expected, h, platform, job.dtype)))
    else:
        cmp = compared(None, loaded.expected, platform=platform, against=STORED, rtol=0.0, atol=0.0, exact=True)
    return [ser, comp.with_status(comp.status, handle=None), ex, cmp]


def judge_stored(h: Harness, records: list[Record]) -> list[Record]:
    """The pipeline's limitation judging for a stored artifact of a catalog harness, on every
    record but compare: a compare limitation speaks of the float64 reference, and a replay
    compares with the outputs stored with the artifact, so a replay that matches them says
    nothing about whether that limitation still holds."""
    judged = iter(judge_run(h, [judge_record(h, r) for r in records if r.stage != "compare"]))
    return [r if r.stage == "compare" else next(judged) for r in records]


def against_today(h: Harness, loaded: deserialize.Loaded, platform: str) -> Record | None:
    """Today's jit of the same harness beside the stored artifact: the ``xhost`` stage (an
    artifact made by another jax, run here, compared with the outputs stored with it and
    with this jax's own lowering on the same inputs). None for raw StableHLO artifacts,
    which ``jax.export`` cannot deserialize."""
    if loaded.meta.get("format", FORMAT_JAX_EXPORT) != FORMAT_JAX_EXPORT:
        return None
    timer = Timer()
    try:
        with timer(), compat.enable_x64(h.needs_x64):
            args = h.make_args()
            tr = trace.run(h, args)
            if not tr.ok:
                return xhost.CrossHost("xhost", platform, "error", tr.seconds, error_type=tr.error_type,
                                       error=f"today's trace failed: {tr.error}", facts={"against": "today"})
            promised = tr.promised
            native = execute.to_numpy(tr.handle.jitted(*tr.handle.dyn))
            rtol, atol = rtol_atol(of_harness(h, platform, promised[0]["dtype"] if promised else None))
            invariant = None if h.invariant is None else (lambda outs: invariant_check(h, args, outs, platform))
            prior = xhost.Prior(loaded.blob, loaded.inputs, loaded.expected, dict(loaded.meta))
            return judge_xhost(xhost.run(prior, platform, tr.handle.dyn), prior, native=native, reference=None,
                               rtol=rtol, atol=atol, exact=h.compare == "exact", promised=promised, invariant=invariant)
    except Exception as e:
        return failure(xhost.CrossHost, "xhost", platform, e, timer.seconds, facts={"against": "today"})


def unread(job_fp: str, name: str, export_sha: str, facts: Mapping[str, Any], error: Exception,
           reason: str) -> Outcome:
    """The outcome of an artifact whose bytes the store could not give (missing, corrupt):
    its serialize record, an error with that one line."""
    return Outcome(job_fp, name, [Record("serialize", "export", "error", error_type=type(error).__name__,
                                         error=str(error)[:1000], facts={**facts, "reason": reason},
                                         artifact=export_sha)], (), 0.0)

