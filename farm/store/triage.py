"""Failure clusters over the database: the failing rows of runs, the acknowledgements, and
``triage(session, ref)``, the report ``farm triage`` and the dashboard's Failures page show.

The clustering itself is ``farm.analysis.clusters`` (pure); here are only the queries.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.analysis.clusters import Cluster, causes, clusters, signed
from farm.analysis.signatures import Signature
from farm.errors import FarmError, RunNotFound
from farm.results import BAD
from farm.store.series import series_runs
from farm.store.models import AcknowledgementRow, HarnessRow, OutcomeRow, ResultRow, Run
from farm.store.models.base import utcnow
from farm.store.queries import _JsonLoader, _raw_json, resolve_run

_KEY = re.compile(r"^[0-9a-f]{12}$")


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


def acknowledgements(session: Session) -> dict[str, dict[str, Any]]:
    """cluster key -> its acknowledgement (note, url, signature, harnesses, platforms, when)."""
    return {a.cluster: _ack_dict(a) for a in session.scalars(select(AcknowledgementRow))}


def _ack_dict(a: AcknowledgementRow) -> dict[str, Any]:
    return {"cluster": a.cluster, "note": a.note, "url": a.url, "signature": a.signature,
            "summary": Signature.from_dict(a.signature).describe() if a.signature else None,
            "harnesses": list(a.harnesses or []), "platforms": list(a.platforms or []), "run_id": a.run_id,
            "created_at": a.created_at.isoformat() if a.created_at else None}


def triage(session: Session, ref: str, expected: bool = False) -> dict[str, Any]:
    """The clusters of run ``ref`` (or of the sweep family ``ref@...``), worst first, with
    history from every run in the database and the acknowledgements; acknowledged clusters
    that an earlier run had and these runs do not are listed as ``gone`` (probably fixed). ``expected``:
    the expected failures (``Limitation`` data) as clusters too."""
    focus = [r.id for r in resolve_runs(session, ref)]
    rows = failing_rows(session, expected=expected)  # every run: first/last seen, new
    briefs = run_briefs(session)
    acks = acknowledgements(session)
    found = clusters(rows, briefs, focus, acks=acks, expected=expected)
    keys = {c.key for c in found}
    start = min(focus)
    before = {sig.key for sig, r in signed((r for r in rows if r["run_id"] < start), expected)} if acks else set()
    records = sum(c.records for c in found)
    return {"runs": [briefs[i] for i in focus], "failing_records": records, "clusters": [c.to_dict() for c in found],
            "new": sum(c.new for c in found), "acknowledged": sum(c.acknowledged is not None for c in found),
            "acknowledged_gone": [a for k, a in sorted(acks.items()) if k not in keys and k in before],
            "causes": causes(found)}


def find_cluster(session: Session, key: str) -> tuple[Cluster, int]:
    """The cluster ``key`` as its latest run has it, and that run's id; a key no run has is
    a ``ClusterNotFound`` (one line, exit 2)."""
    key = key.strip().lower()
    if not _KEY.match(key):
        raise ClusterNotFound(f"{key!r} is not a cluster key (12 hex digits, as `farm triage RUN` lists them)")
    members = [r for sig, r in signed(failing_rows(session)) if sig.key == key]
    if members:
        rid = max(r["run_id"] for r in members)
        [c] = clusters([r for r in members if r["run_id"] == rid], run_briefs(session), [rid])
        return c, rid
    raise ClusterNotFound(f"no cluster {key!r} in any run (list them with `farm triage RUN`)")


def acknowledge(session: Session, key: str, note: str, url: str | None = None) -> dict[str, Any]:
    """Acknowledge cluster ``key`` (or update its note and link): it will not fail the gate.
    It records the harnesses and platforms the cluster covers now, so a spread is seen."""
    c, rid = find_cluster(session, key)
    a = session.scalar(select(AcknowledgementRow).where(AcknowledgementRow.cluster == c.key))
    if a is None:
        a = AcknowledgementRow(cluster=c.key)
        session.add(a)
    a.note, a.url, a.signature, a.created_at = note, url, c.signature.to_dict(), utcnow()
    a.harnesses, a.platforms, a.run_id = list(c.harnesses), list(c.platforms), rid
    session.flush()
    return _ack_dict(a)


def unacknowledge(session: Session, key: str) -> None:
    a = session.scalar(select(AcknowledgementRow).where(AcknowledgementRow.cluster == key.strip().lower()))
    if a is None:
        raise ClusterNotFound(f"cluster {key!r} is not acknowledged")
    session.delete(a)


def sweep_lines(session: Session, run_id: int) -> list[str]:
    """What the end of ``farm sweep`` says about a run's failure clusters: how many, how
    many new (no earlier run had them), and against the previous comparable run which
    appeared and which went; acknowledged ones that changed are named."""
    from farm.analysis.clusters import acknowledged_changes, diff  # noqa: PLC0415  (with clusters above)
    from farm.store.reports import previous_comparable  # noqa: PLC0415  (reports imports the analysis)

    run = session.get(Run, run_id)
    if run is None:
        return []
    rows = failing_rows(session)
    acks = acknowledgements(session)
    found = clusters(rows, run_briefs(session), [run_id], acks=acks)
    line = (f"clusters: {len(found)} ({sum(c.new for c in found)} new, "
            f"{sum(c.acknowledged is not None for c in found)} acknowledged; `farm triage {run.name}`)")
    prev = previous_comparable(session, run)
    if prev is None:
        return [line]
    ran = session.scalars(select(HarnessRow.fingerprint).join(OutcomeRow, OutcomeRow.harness_id == HarnessRow.id)
                          .where(OutcomeRow.run_id == run_id)).all()
    d = diff([r for r in rows if r["run_id"] == prev.id], [r for r in rows if r["run_id"] == run_id], ran)
    out = [line, f"clusters since {prev.name}: {len(d['appeared'])} appeared, {len(d['gone'])} gone, "
                 f"{len(d['spread'])} spread"]
    out += [f"acknowledged cluster {e['key']} {'gone (probably fixed)' if e['change'] == 'gone' else e['change']}: "
            f"{e['summary'][:100]}" for e in acknowledged_changes(d, acks)]
    return out
