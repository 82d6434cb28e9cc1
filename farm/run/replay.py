"""Replay: stored export artifacts re-run on the current jax through the pipeline's stages,
and compared with the outputs stored when they were made.

Replay is another source of jobs for the same pipeline, the same workers and the same
judging:

* where artifacts come from (``replay_sources``): a sweep's own exports (``--from RUN``,
  ``--since DATE``), or JAX's back-compat data shipped in the wheel (``--jax-backcompat``),
  imported as artifacts first;
* each becomes an ``ArtifactJob`` (its bytes read and verified here) that ``run_harness``
  runs (``farm.pipeline.artifact``): the serialize stage backwards, then compile, execute
  and compare, judged by ``farm.judge.stored`` and, for an artifact whose
  harness is still in the catalog, its tolerance and limitations; ``--against-today`` adds
  an ``xhost`` record (the artifact beside today's jit of the same harness);
* the jobs run on the sweep's scheduler (``--workers N``: Ray workers, with their crash
  and timeout isolation) or, with ``workers=0``, in this process.

Each artifact's records are one ``Outcome`` in a run of kind ``replay``, so it shows in the
dashboard and in ``farm compare``. ``farm replay`` reports each artifact by the record that
decides it (``ReplayedArtifact``): how old it is, whether it is inside JAX's stated
compatibility window, which custom calls it uses and whether each is still guaranteed
stable, and how the outputs were judged (exact, within tolerance, or by an invariant).

This module is the driver and the public face: some names below are re-exported from
the modules they live in.
"""
from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from sqlalchemy.orm import Session

from farm.catalog import Harness, by_fingerprint, load as load_catalog
from farm.errors import FarmError
from farm.pipeline import ArtifactJob, run_harness
from farm.pipeline.artifact import ARTIFACT_STAGES, unread
from farm.judge import JUDGED, of_stored, replayed, rtol_atol  # noqa: F401  (JUDGED: public name)
from farm.platforms import native_platform
from farm.results import SEVERITY, Options, Outcome, Record
from farm.run import cluster
from farm.run.progress import SweepConfig
from farm.run.replay_sources import (  # noqa: F401  (public names)
    BACKCOMPAT_CATALOG, BACKCOMPAT_PACKAGE, BackCompatEntry, StoredExport, backcompat_entries, census_custom_calls,
    from_run, import_backcompat, io_blob, poly_specs, primitive_of, select_exports, since,
)
from farm.run.scheduler import Sweep
from farm.stages.stored import (  # noqa: F401  (public names)
    FORMAT_JAX_EXPORT, FORMAT_STABLEHLO, FORMATS, WINDOW_DAYS, ReplayError, artifact_facts, custom_calls_of,
    load_exported, reason_of,
)
from farm.store import artifacts, writes
from farm.store.models import ArtifactRow

#: The stages a replay runs (``farm.pipeline.artifact``).
REPLAY_STAGES = ARTIFACT_STAGES


@dataclass(frozen=True, slots=True)
class ReplayedArtifact:
    """One artifact's replay as ``farm replay`` reports it: the outcome that is stored, read
    through the record that decides it (the worst of the replay stages, the last of equals)."""

    outcome: Outcome
    platform: str

    @property
    def records(self) -> list[Record]:
        return [r for r in self.outcome.records if r.stage in REPLAY_STAGES]

    @property
    def verdict(self) -> Record:
        worst = max(SEVERITY[r.status] for r in self.records)
        return [r for r in self.records if SEVERITY[r.status] == worst][-1]

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def error(self) -> str | None:
        return self.verdict.error

    @property
    def error_type(self) -> str | None:
        return self.verdict.error_type

    @property
    def metrics(self) -> Mapping[str, float]:
        return self.verdict.metrics

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.records)

    @property
    def facts(self) -> dict[str, Any]:
        """The artifact's facts (its serialize record's), how the outputs were judged and,
        when it did not replay, why."""
        by_stage = {r.stage: r for r in self.records}
        cmp = by_stage.get("compare")
        return {**{k: v for k, v in by_stage["serialize"].facts.items() if k != "reason"},
                "judged": cmp.facts.get("judged", "none") if cmp is not None else "none",
                "reason": self.verdict.facts.get("reason")}


@dataclass
class ReplayReport:
    """What ``farm replay`` prints: the run, each artifact's replay, and coverage."""

    run_id: int
    run_name: str
    items: list[tuple[StoredExport, ReplayedArtifact]]
    coverage: dict[str, Any] | None = None

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for _, r in self.items))

    def summary(self) -> dict[str, Any]:
        """Counts by status, with failures split into real breakages (inside JAX's window)
        and artifacts outside the window, and non-unique/tolerance passes counted apart."""
        s: Counter[str] = Counter()
        for _, r in self.items:
            f = r.facts
            if r.status == "ok":
                s[f"ok_{f.get('judged')}"] += 1
            elif r.status in ("fail", "error"):
                outside = f.get("outside_window") or f.get("cc_supported") is False
                s[f"{r.status}_{'outside_window' if outside else 'breakage'}"] += 1
            else:
                s[r.status] += 1
        return dict(sorted(s.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"run": {"id": self.run_id, "name": self.run_name}, "counts": self.counts(),
                "summary": self.summary(),
                "artifacts": [{"harness": it.harness.get("name"), "primitive": it.harness.get("primitive"),
                               "dtype": it.harness.get("dtype"), "export": it.export_sha, "io": it.io_sha,
                               "status": r.status, "error_type": r.error_type, "error": r.error,
                               "seconds": round(r.seconds, 4), "metrics": dict(r.metrics), **r.facts}
                              for it, r in self.items],
                "coverage": self.coverage}


def replay(session: Session, items: Sequence[StoredExport], *, env: dict[str, Any], today: dt.date | None = None,
           name: str | None = None, filters: dict[str, Any] | None = None, catalog: str = "farm",
           today_lowering: bool = False, opts: Options = Options(), workers: int = 0,
           config: SweepConfig | None = None) -> ReplayReport:
    """Replay ``items`` into a new run of kind ``replay`` (caller commits).

    Each stored export becomes an ``ArtifactJob`` for ``run_harness``. ``workers`` > 0: the
    jobs run on the sweep's scheduler (Ray workers: a crash or a hang is a ``crashed`` or
    ``timeout`` record, the rest go on); 0: in this process, one after the other.
    ``today_lowering``: also run today's jit of each harness still in the catalog beside
    the replayed artifact (an ``xhost`` record)."""
    today = today or dt.date.today()
    platform = native_platform(jax.default_backend())
    run = writes.create_run(session, env=env, name=name, kind="replay", catalog=catalog, filters=filters or {},
                            platforms=[platform], run_on=[platform], total=len(items))
    writer = writes.Writer(session, run, writes.harness_ids(session, [it.harness for it in items]))
    jobs, outcomes = [], {}
    for i, it in enumerate(items):
        job = artifact_job(session, it, today, today_lowering, index=i)
        if isinstance(job, Outcome):
            outcomes[i] = job
        else:
            jobs.append(job)
    def sink(done: list[Outcome], worker: str) -> None:
        for o in done:
            outcomes[_index(o)] = _unindexed(o)
        writer.write([_unindexed(o) for o in done], worker=worker)

    sink(list(outcomes.values()), "replay")

    if workers > 0 and jobs:
        _on_workers(jobs, catalog, opts, config or SweepConfig(), workers, sink)
    else:
        harnesses = _CatalogHarnesses()
        for job in jobs:
            sink([run_harness(job, opts, catalog_harness=harnesses.get(job))], "replay")
    done = [(it, ReplayedArtifact(outcomes[i], platform)) for i, it in enumerate(items)]
    report = ReplayReport(run.id, run.name, done)
    writes.finish_run(session, run, "finished", {"replayed": len(done), "counts": report.counts()})
    session.flush()
    return report


def artifact_job(session: Session, item: StoredExport, today: dt.date, today_lowering: bool,
                 index: int = 0) -> ArtifactJob | Outcome:
    """The job for one stored export, its bytes read (and verified) from the store; an
    artifact the store cannot give is its outcome at once (serialize ``error``)."""
    row = session.get(ArtifactRow, item.export_sha)
    meta = dict(row.meta or {}) if row is not None else {}
    facts = {"source": item.source_run or item.harness.get("source") or "", "export": item.export_sha,
             **artifact_facts(meta, row.jax_version if row is not None else None,
                              row.created_at if row is not None else None, today)}
    io_sha = item.io_sha or meta.get("io")
    fp = f"{item.harness['fingerprint']}#{index}"  # one job per artifact, several may share a harness
    try:
        blob = artifacts.get(session, item.export_sha)[1]
        io = artifacts.get(session, io_sha)[1] if io_sha else None
    except FarmError as e:  # missing, corrupt, unknown format version: one clear line
        return unread(fp, item.harness["name"], item.export_sha, {**facts, "io": io_sha}, e, reason_of(e))
    return ArtifactJob(fp, item.harness["name"], str(item.harness.get("primitive", "")), item.harness.get("dtype"),
                       item.export_sha, blob, io_sha, io, meta, facts, today=today_lowering,
                       catalog=None if item.harness.get("catalog") == BACKCOMPAT_CATALOG else
                       item.harness.get("catalog", "farm"))


def _index(o: Outcome) -> int:
    return int(o.fingerprint.rsplit("#", 1)[1])


def _unindexed(o: Outcome) -> Outcome:
    """The outcome filed under its harness's fingerprint (as the writer stored it)."""
    return o.replace(fingerprint=o.fingerprint.rsplit("#", 1)[0])


def _on_workers(jobs: list[ArtifactJob], catalog: str, opts: Options, config: SweepConfig, workers: int,
                sink: Any) -> None:
    """The jobs on the sweep's scheduler: the same workers, isolation and judging as a sweep."""
    config.workers = workers
    started, config.workers = cluster.ray_init(config.address, config.workers, ("cpu",))
    try:
        worker_catalog = "farm" if catalog == BACKCOMPAT_CATALOG else catalog
        Sweep(jobs, opts, worker_catalog, config, sink).run()
    finally:
        if started:
            cluster.shutdown()


class _CatalogHarnesses:
    """The catalog harness of an artifact job (by fingerprint), or None: the back-compat
    data, a catalog this farm cannot load, a harness no longer in it."""

    def __init__(self) -> None:
        self._by_catalog: dict[str, dict[str, Harness]] = {}

    def get(self, job: ArtifactJob) -> Harness | None:
        if job.catalog is None:
            return None
        if job.catalog not in self._by_catalog:
            try:
                self._by_catalog[job.catalog] = by_fingerprint(load_catalog(job.catalog))
            except FarmError:
                self._by_catalog[job.catalog] = {}
        return self._by_catalog[job.catalog].get(job.harness_fingerprint)


def judge(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], primitive: str,
          tol: tuple[float, float] | None = None) -> tuple[str, str, str | None, str | None, dict[str, float]]:
    """(status, judged, reason, error, metrics) of replayed outputs against stored ones,
    with the catalog's default tolerance unless ``tol`` is given."""
    actual, expected = list(actual), list(expected)
    rec = replayed(actual, expected, primitive=primitive, platform="cpu",
                 tol=tol if tol is not None else rtol_atol(of_stored(expected, None, "cpu")))
    return rec.status, rec.facts["judged"], rec.facts["reason"], rec.error, dict(rec.metrics)


def coverage(seen: Any, replayed: Any) -> dict[str, Any]:
    """Which custom-call targets seen in the catalog's cpu exports are exercised by at
    least one back-compat artifact that replayed ``ok`` here.

    ``replayed``: (custom_call_targets, status) per back-compat artifact."""
    seen = set(seen)
    covered: set[str] = set()
    tested: set[str] = set()
    for targets, status in replayed:
        tested |= set(targets)
        if status == "ok":
            covered |= set(targets)
    return {"seen": sorted(seen), "covered": sorted(seen & covered),
            "uncovered": sorted(seen - covered),
            "uncovered_but_tested": sorted((seen - covered) & tested)}
