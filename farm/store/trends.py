"""Per-run summaries for trend pages: result counts and stage-time quantiles, kept.

A finished run never changes, so its summary is computed once (two queries over its
results: ~0.3 s for a full-catalog run of ~100k results) and stored as derived data in
the ``reports`` table, as the run's report against itself under the settings key
``SUMMARY_KEY``. It is trusted only while its format version is current and the run's
id, status, finish time and status counts are unchanged (``reports.stamp``); a running
run's summary is computed and never stored.

Example::

    with store.session() as s:
        runs = trends.recent_runs(s, 10)
        sums = trends.summaries(s, runs)
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from farm.store import queries, reports
from farm.store.models import ReportRow, ResultRow
from farm.store.models.base import utcnow
from farm.results import TIMED

#: Version of a stored summary's content; another version is recomputed.
FORMAT_VERSION = 1
SUMMARY_KEY = hashlib.sha256(b"farm.store.trends run summary").hexdigest()
#: Statuses whose timings are a stage's real work (a skipped stage's 0 s is not).
QUANTILES = {"p05": 0.05, "q1": 0.25, "median": 0.5, "q3": 0.75, "p95": 0.95}


def recent_runs(session: Session, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` runs, oldest first, each a ``queries.run_dict`` with counts
    (``done``: harnesses with an outcome; ``status_counts``), in three queries."""
    return list(reversed(queries.list_runs(session, limit=limit)))


def _quantiles(values: list[float]) -> dict[str, float]:
    """Linear-interpolated quantiles (NumPy's default method) of a sorted list."""
    out = {}
    n = len(values)
    for name, q in QUANTILES.items():
        pos = q * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        out[name] = values[lo] + (values[hi] - values[lo]) * (pos - lo)
    return out


def compute(session: Session, run_id: int) -> dict[str, Any]:
    """One run's summary: ``counts`` rows ``{stage, platform, status, n}`` and ``seconds``
    rows ``{stage, n, p05, q1, median, q3, p95, total}`` over the timed results."""
    r = ResultRow
    counts = [{"stage": st, "platform": pl, "status": status, "n": n} for st, pl, status, n in session.execute(
        select(r.stage, r.platform, r.status, func.count()).where(r.run_id == run_id)
        .group_by(r.stage, r.platform, r.status).order_by(r.stage, r.platform, r.status))]
    by_stage: dict[str, list[float]] = {}
    for stage, sec in session.execute(select(r.stage, r.seconds)
                                      .where(r.run_id == run_id, r.status.in_(TIMED), r.seconds > 0)):
        by_stage.setdefault(stage, []).append(sec)
    seconds = []
    for stage, vals in sorted(by_stage.items()):  # rows come in storage order, which a delta run changes
        vals.sort()
        seconds.append({"stage": stage, "n": len(vals), **_quantiles(vals), "total": math.fsum(vals)})
    return {"format_version": FORMAT_VERSION, "run_id": run_id, "counts": counts, "seconds": seconds}


def _stored(session: Session, runs: Sequence[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    ids = [r["id"] for r in runs]
    rows = session.execute(select(ReportRow.head_run_id, ReportRow.format_version, ReportRow.runs_stamp,
                                  ReportRow.content, ReportRow.sha256)
                           .where(ReportRow.head_run_id.in_(ids), ReportRow.base_run_id == ReportRow.head_run_id,
                                  ReportRow.settings_key == SUMMARY_KEY)).all()
    stamps = {r["id"]: reports.stamp([r]) for r in runs}
    out = {}
    for rid, version, stamp, content, sha in rows:
        if version == FORMAT_VERSION and stamp == stamps[rid] and hashlib.sha256(content.encode()).hexdigest() == sha:
            out[rid] = json.loads(content)
    return out


def _store(session: Session, run: dict[str, Any], summary: dict[str, Any], seconds: float) -> None:
    text = json.dumps(summary)
    values = {"base_run_id": run["id"], "head_run_id": run["id"], "settings_key": SUMMARY_KEY,
              "settings": {"kind": "run summary"}, "format_version": FORMAT_VERSION,
              "runs_stamp": reports.stamp([run]), "content": text,
              "sha256": hashlib.sha256(text.encode()).hexdigest(), "seconds": max(0.0, seconds),
              "created_at": utcnow()}
    keys = ["base_run_id", "head_run_id", "settings_key"]
    dialect = session.get_bind().dialect.name
    ins = (sqlite if dialect == "sqlite" else postgresql).insert(ReportRow).values(values)
    session.execute(ins.on_conflict_do_update(index_elements=keys,
                                              set_={k: v for k, v in values.items() if k not in keys}))


def summaries(session: Session, runs: Sequence[dict[str, Any]], *, keep: bool = True) -> dict[int, dict[str, Any]]:
    """run id -> summary for ``runs`` (``run_dict``s with counts): stored ones read in one
    query, the others computed; those of finished runs are stored when ``keep`` (the
    caller commits)."""
    out = _stored(session, runs)
    for run in runs:
        if run["id"] in out:
            continue
        t0 = time.perf_counter()
        out[run["id"]] = compute(session, run["id"])
        if keep and run["status"] == "finished" and session.get_bind().dialect.name in ("sqlite", "postgresql"):
            _store(session, run, out[run["id"]], time.perf_counter() - t0)
    return out
