"""Failure clusters' rows: the failing rows of runs, the runs' briefs and the
acknowledgements (read, written, removed).

The clustering is ``farm.analysis.clusters`` (pure) and the report ``farm triage`` and the
dashboard's Failures page show is ``farm.reports.triage``, over these rows.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.errors import FarmError, RunNotFound
from farm.results import BAD
from farm.store.series import series_runs
from farm.store.models import AcknowledgementRow, HarnessRow, OutcomeRow, ResultRow, Run
from farm.store.models.base import utcnow
from farm.store.queries import _JsonLoader, _raw_json, resolve_run


class ClusterNotFound(FarmError):
    http_status = 404


def resolve_runs(session: Session, ref: str) -> list[Run]:
    """A run by id, name, ``latest`` or ``previous``; or, where no run has that name, every
    run of the configuration or jax-version sweep named ``ref`` (its series)."""
    try:
        return [resolve_run(session, ref)]
    except RunNotFound:
        family = series_runs(session, ref)
        if family:
            return family
        raise


def failing_rows(session: Session, run_ids: Iterable[int] | None = None, expected: bool = False
                 ) -> list[dict[str, Any]]:
    """The failing result rows (a status in ``BAD``, and ``expected_fail`` if ``expected``)
    of these runs (default: every run), with their run id and harness: what
    ``farm.analysis.clusters`` groups. One query."""
    r = ResultRow
    q = (select(r.run_id, HarnessRow.name, HarnessRow.fingerprint, HarnessRow.primitive, HarnessRow.dtype,
                r.platform, r.stage, r.status, r.error_type, r.error, _raw_json(r.metrics), _raw_json(r.facts))
         .join(HarnessRow, HarnessRow.id == r.harness_id)
         .where(r.status.in_(BAD + (("expected_fail",) if expected else ()))))
    # naming the runs lets the (run_id, status) index find the failing rows (a scan otherwise)
    q = q.where(r.run_id.in_(list(run_ids) if run_ids is not None else select(Run.id).scalar_subquery()))
    load = _JsonLoader(shared=True)
    keys = ("run_id", "harness", "fingerprint", "primitive", "dtype", "platform", "stage", "status", "error_type",
            "error", "metrics", "facts")
    out = []
    for row in session.connection().execute(q).all():
        d = dict(zip(keys, row))
        d["metrics"], d["facts"] = load(d["metrics"]), load(d["facts"])
        out.append(d)
    return out


def run_briefs(session: Session) -> dict[int, dict[str, Any]]:
    return {i: {"id": i, "name": n, "started_at": t.isoformat() if t else None}
            for i, n, t in session.execute(select(Run.id, Run.name, Run.started_at))}


def fingerprints_run(session: Session, run_id: int) -> list[str]:
    """The fingerprints of the harnesses run ``run_id`` has an outcome for."""
    return list(session.scalars(select(HarnessRow.fingerprint).join(OutcomeRow, OutcomeRow.harness_id == HarnessRow.id)
                                .where(OutcomeRow.run_id == run_id)).all())


def acknowledgements(session: Session) -> dict[str, dict[str, Any]]:
    """cluster key -> its acknowledgement (note, url, signature, harnesses, platforms, when)."""
    return {a.cluster: _ack_dict(a) for a in session.scalars(select(AcknowledgementRow))}


def _ack_dict(a: AcknowledgementRow) -> dict[str, Any]:
    return {"cluster": a.cluster, "note": a.note, "url": a.url, "signature": a.signature,
            "harnesses": list(a.harnesses or []), "platforms": list(a.platforms or []), "run_id": a.run_id,
            "created_at": a.created_at.isoformat() if a.created_at else None}


def acknowledge(session: Session, key: str, note: str, url: str | None, signature: dict[str, Any],
                harnesses: Iterable[str], platforms: Iterable[str], run_id: int) -> dict[str, Any]:
    """Write the acknowledgement of cluster ``key`` (or update its note and link) with what
    the cluster covers now (its signature, harnesses and platforms, the run it was read in)."""
    a = session.scalar(select(AcknowledgementRow).where(AcknowledgementRow.cluster == key))
    if a is None:
        a = AcknowledgementRow(cluster=key)
        session.add(a)
    a.note, a.url, a.signature, a.created_at = note, url, signature, utcnow()
    a.harnesses, a.platforms, a.run_id = list(harnesses), list(platforms), run_id
    session.flush()
    return _ack_dict(a)


def unacknowledge(session: Session, key: str) -> None:
    a = session.scalar(select(AcknowledgementRow).where(AcknowledgementRow.cluster == key.strip().lower()))
    if a is None:
        raise ClusterNotFound(f"cluster {key!r} is not acknowledged")
    session.delete(a)
