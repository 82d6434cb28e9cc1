"""Which worker produced which results of a run: the rows that
``farm.analysis.workers.group_results`` groups by the worker's environment.

The link: each outcome row names its worker(s) (``harness_outcomes.worker``), and the run
keeps each worker's environment under that label (``runs.stats["worker_environments"]``).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from farm.store.models import OutcomeRow, ResultRow, Run


def worker_environments(run: Run) -> dict[str, dict[str, Any]]:
    """label -> that worker process's own environment, as the sweep recorded it."""
    return dict((run.stats or {}).get("worker_environments") or {})


#: (worker label(s), platform, stage, status, count): what ``group_results`` groups.
Counts = list[tuple[str, str | None, str | None, str, int]]


def result_counts(session: Session, run: Run) -> Counts:
    """The run's results counted by worker, platform, stage and status.

    Two linear reads counted here, not one join in SQL: both sides are views (``results``,
    ``harness_outcomes``) that SQLite materializes and then joins by nested scans, which cost
    9.9 s for a 2,500-harness run and grew with the square of the run."""
    worker = dict(session.execute(select(OutcomeRow.harness_id, OutcomeRow.worker)
                                  .where(OutcomeRow.run_id == run.id)).tuples().all())
    counts = Counter((worker[hid], platform, stage, status) for hid, platform, stage, status in session.execute(
        select(ResultRow.harness_id, ResultRow.platform, ResultRow.stage, ResultRow.status)
        .where(ResultRow.run_id == run.id)).tuples() if hid in worker)
    return [(*key, n) for key, n in sorted(counts.items(), key=lambda kv: [x or "" for x in kv[0]])]


def outcome_counts(session: Session, run_ids: list[int]) -> dict[int, tuple[dict[str, dict[str, Any]], Counts]]:
    """Per run: its workers' environments and its harness outcomes counted by worker and
    worst status (an outcome of several device kinds counts under each kind's worker:
    ``group_results`` splits the labels); two queries."""
    if not run_ids:
        return {}
    runs = session.scalars(select(Run).where(Run.id.in_(list(run_ids)))).all()
    rows: dict[int, list[tuple[str, None, None, str, int]]] = {r.id: [] for r in runs}
    for rid, worker, worst, n in session.execute(
            select(OutcomeRow.run_id, OutcomeRow.worker, OutcomeRow.worst, func.count())
            .where(OutcomeRow.run_id.in_(list(rows))).group_by(OutcomeRow.run_id, OutcomeRow.worker, OutcomeRow.worst)):
        rows[rid].append((worker, None, None, worst, n))
    return {r.id: (worker_environments(r), rows[r.id]) for r in runs}
