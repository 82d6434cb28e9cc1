"""Which worker produced which results of a run, grouped by the worker's environment.

The link: each outcome row names its worker(s) (``harness_outcomes.worker``), and the run
keeps each worker's environment under that label (``runs.stats["worker_environments"]``).
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from farm.analysis.workers import group_results
from farm.store.models import OutcomeRow, ResultRow, Run


def worker_environments(run: Run) -> dict[str, dict[str, Any]]:
    """label -> that worker process's own environment, as the sweep recorded it."""
    return dict((run.stats or {}).get("worker_environments") or {})


def results_by_environment(session: Session, run: Run) -> list[dict[str, Any]]:
    """The run's results (platform x stage x status counts) grouped by worker environment."""
    o, r = OutcomeRow, ResultRow
    rows = session.execute(
        select(o.worker, r.platform, r.stage, r.status, func.count())
        .join(o, and_(o.run_id == r.run_id, o.harness_id == r.harness_id))
        .where(r.run_id == run.id).group_by(o.worker, r.platform, r.stage, r.status)).tuples().all()
    return group_results(worker_environments(run), rows)


def outcomes_by_environment(session: Session, run_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Per run: its harness outcomes (by worst status) grouped by worker environment (an
    outcome of several device kinds counts under each kind's worker); two queries."""
    if not run_ids:
        return {}
    runs = session.scalars(select(Run).where(Run.id.in_(list(run_ids)))).all()
    rows: dict[int, list[tuple[str, None, None, str, int]]] = {r.id: [] for r in runs}
    for rid, worker, worst, n in session.execute(
            select(OutcomeRow.run_id, OutcomeRow.worker, OutcomeRow.worst, func.count())
            .where(OutcomeRow.run_id.in_(list(rows))).group_by(OutcomeRow.run_id, OutcomeRow.worker, OutcomeRow.worst)):
        rows[rid].append((worker, None, None, worst, n))
    return {r.id: group_results(worker_environments(r), rows[r.id]) for r in runs}
