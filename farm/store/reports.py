"""Stored comparison reports: the ``reports`` table's rows, one ``farm.analysis.report``
of a head run against a base run per (base, head, settings), computed once and kept
(``farm.reports.comparison`` computes them and decides when to store one).

A finished run's results do not change, so neither does a comparison of two finished
runs. A stored report is used only while

- its format version is the analysis's ``FORMAT_VERSION`` (the row's and the JSON's),
- its text matches its sha256,
- every run it read is as it was then: same status, ``finished_at`` and status counts
  (a resumed run gets a new ``finished_at`` and more results),
- the head run's catalog selection (``selection``: which harnesses it should have run,
  which the regression gate reads) is what it was then (a harness added to or removed
  from the catalog since is a different report);

otherwise it is recomputed and the row overwritten. A comparison that involves a run
that is not finished (running, or interrupted or failed and so resumable) is computed
every time and never stored.

``get`` and ``put`` read and write one report in the caller's session, under its
settings' key (``farm.reports.comparison.Settings``).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from farm.store import queries
from farm.store.models import ReportRow, Run
from farm.store.models.base import utcnow

RunDict = dict[str, Any]  # ``queries.run_dict`` with ``status_counts``


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def stamp(runs: Sequence[RunDict], selected: Mapping[str, str] | None = None) -> str:
    """What a report depends on of its runs: id, status, finished_at and status counts
    (``run_dict`` with counts; without them a change of results would go unseen), and the
    head run's ``selection`` (None: unknown)."""
    parts: list[Any] = [[r["id"], r["status"], r["finished_at"], sorted(r["status_counts"].items())] for r in runs]
    if selected is not None:
        parts.append(sorted(selected.items()))
    return _sha(json.dumps(parts))


def cacheable(runs: Sequence[RunDict]) -> bool:
    """Whether a report over these runs may be stored: all of them finished."""
    return all(r["status"] == "finished" for r in runs)


def _natural(base: RunDict, head: RunDict, settings_key: str) -> Any:
    return ((ReportRow.base_run_id == base["id"]) & (ReportRow.head_run_id == head["id"])
            & (ReportRow.settings_key == settings_key))


def get(session: Session, base: RunDict, head: RunDict, settings_key: str, format_version: int,
        history: Sequence[RunDict] = (), selected: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The stored report of ``head`` against ``base``, or None if there is none or it is stale
    (old format, altered text, runs that changed since, or another ``selected``, the head
    run's ``selection``, or a ``format_version`` other than the analysis's now). One query."""
    row = session.scalar(select(ReportRow).where(_natural(base, head, settings_key)))
    if row is None or row.format_version != format_version:
        return None
    if row.runs_stamp != stamp([base, head, *history], selected) or _sha(row.content) != row.sha256:
        return None
    rep = json.loads(row.content)
    return rep if rep.get("format_version") == format_version else None


def put(session: Session, base: RunDict, head: RunDict, report: dict[str, Any], settings_key: str,
        settings: Mapping[str, Any], history: Sequence[RunDict] = (), seconds: float = 0.0,
        selected: Mapping[str, str] | None = None) -> None:
    """Store (or replace) the report of ``head`` against ``base`` under ``settings_key``
    (``settings``: what the key stands for, kept beside it). One statement.

    Raises:
      ValueError: a run is not finished (its results may still change), or the report
        has no ``format_version``.
    """
    runs = [base, head, *history]
    if not cacheable(runs):
        late = next(r for r in runs if r["status"] != "finished")
        raise ValueError(f"run {late['name']!r} is {late['status']}: only reports of finished runs are stored")
    if not isinstance(report.get("format_version"), int):
        raise ValueError("a report without a format_version cannot be stored")
    text = json.dumps(report)
    values = {"base_run_id": base["id"], "head_run_id": head["id"], "settings_key": settings_key,
              "settings": dict(settings), "format_version": report["format_version"],
              "runs_stamp": stamp(runs, selected), "content": text, "sha256": _sha(text), "seconds": max(0.0, seconds),
              "created_at": utcnow()}
    dialect = session.get_bind().dialect.name
    keys = ["base_run_id", "head_run_id", "settings_key"]
    if dialect in ("sqlite", "postgresql"):
        ins = (sqlite if dialect == "sqlite" else postgresql).insert(ReportRow).values(values)
        session.execute(ins.on_conflict_do_update(index_elements=keys,
                                                  set_={k: v for k, v in values.items() if k not in keys}))
    else:
        session.execute(delete(ReportRow).where(_natural(base, head, settings_key)))
        session.execute(insert(ReportRow).values(values))


def history(session: Session, base_id: int, head_id: int, n: int) -> list[RunDict]:
    """The ``n`` newest runs before the head, the base excluded, with their status counts."""
    if n <= 0:
        return []
    runs = session.scalars(select(Run).where(Run.id < head_id, Run.id != base_id)
                           .order_by(Run.id.desc()).limit(n)).all()
    counts = queries.status_counts(session, [r.id for r in runs])
    return [queries.run_dict(session, r, with_counts=False) | {"status_counts": counts[r.id]} for r in runs]


def previous_comparable(session: Session, run: Run) -> Run | None:
    """The newest finished run before ``run`` of the same catalog."""
    return session.scalar(select(Run).where(Run.id < run.id, Run.status == "finished", Run.catalog == run.catalog)
                          .order_by(Run.id.desc()).limit(1))


