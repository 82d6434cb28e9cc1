"""Failure clusters as reports: ``triage(session, ref)``, what ``farm triage`` and the
dashboard's Failures page show; a cluster found by its key and acknowledged; what the end
of ``farm sweep`` says about a run's clusters.

The rows are the store's (``farm.store.triage``), the clustering is
``farm.analysis.clusters`` (pure); this module puts the two together.
"""
from __future__ import annotations

import re
from typing import Any

from sqlalchemy.orm import Session

from farm.analysis.clusters import Cluster, acknowledged_changes, causes, clusters, diff, signed
from farm.analysis.shapes import keeps
from farm.analysis.signatures import Signature
from farm.store import triage as rows
from farm.store.models import Run
from farm.store.reports import previous_comparable
from farm.store.triage import ClusterNotFound

_KEY = re.compile(r"^[0-9a-f]{12}$")


def with_summary(ack: dict[str, Any]) -> dict[str, Any]:
    """An acknowledgement row with its signature described in words (``summary``)."""
    out = {}
    for k, v in ack.items():
        out[k] = v
        if k == "signature":
            out["summary"] = Signature.from_dict(v).describe() if v else None
    return out


def acknowledgements(session: Session) -> dict[str, dict[str, Any]]:
    """cluster key -> its acknowledgement (note, url, signature and its ``summary``,
    harnesses, platforms, when)."""
    return {k: with_summary(a) for k, a in rows.acknowledgements(session).items()}


def triage(session: Session, ref: str, expected: bool = False, shapes: str = "both") -> dict[str, Any]:
    """The clusters of run ``ref`` (or of the sweep family ``ref@...``), worst first, with
    history from every run in the database and the acknowledgements; acknowledged clusters
    that an earlier run had and these runs do not are listed as ``gone`` (probably fixed). ``expected``:
    the expected failures (``Limitation`` data) as clusters too. ``shapes``: the clusters of
    static or symbolic stages alone (both: all); the clustering itself sees every row, since
    a symbolic failure's scope depends on the harness's static records."""
    focus = [r.id for r in rows.resolve_runs(session, ref)]
    failing = rows.failing_rows(session, expected=expected)  # every run: first/last seen, new
    briefs = rows.run_briefs(session)
    acks = acknowledgements(session)
    every = clusters(failing, briefs, focus, acks=acks, expected=expected)
    found = [c for c in every if keeps(c.signature.stage, shapes)]
    keys = {c.key for c in every}
    start = min(focus)
    before = {sig.key for sig, r in signed((r for r in failing if r["run_id"] < start), expected)} if acks else set()
    records = sum(c.records for c in found)
    return {"runs": [briefs[i] for i in focus], "failing_records": records, "clusters": [c.to_dict() for c in found],
            "new": sum(c.new for c in found), "acknowledged": sum(c.acknowledged is not None for c in found),
            "acknowledged_gone": [a for k, a in sorted(acks.items()) if k not in keys and k in before
                                  and keeps((a.get("signature") or {}).get("stage", ""), shapes)],
            "causes": causes(found)}


def find_cluster(session: Session, key: str) -> tuple[Cluster, int]:
    """The cluster ``key`` as its latest run has it, and that run's id; a key no run has is
    a ``ClusterNotFound`` (one line, exit 2)."""
    key = key.strip().lower()
    if not _KEY.match(key):
        raise ClusterNotFound(f"{key!r} is not a cluster key (12 hex digits, as `farm triage RUN` lists them)")
    members = [r for sig, r in signed(rows.failing_rows(session)) if sig.key == key]
    if members:
        rid = max(r["run_id"] for r in members)
        [c] = clusters([r for r in members if r["run_id"] == rid], rows.run_briefs(session), [rid])
        return c, rid
    raise ClusterNotFound(f"no cluster {key!r} in any run (list them with `farm triage RUN`)")


def acknowledge(session: Session, key: str, note: str, url: str | None = None) -> dict[str, Any]:
    """Acknowledge cluster ``key`` (or update its note and link): it will not fail the gate.
    It records the harnesses and platforms the cluster covers now, so a spread is seen."""
    c, rid = find_cluster(session, key)
    return with_summary(rows.acknowledge(session, c.key, note, url, c.signature.to_dict(), c.harnesses, c.platforms,
                                         rid))


def sweep_lines(session: Session, run_id: int) -> list[str]:
    """What the end of ``farm sweep`` says about a run's failure clusters: how many, how
    many new (no earlier run had them), and against the previous comparable run which
    appeared and which went; acknowledged ones that changed are named."""
    run = session.get(Run, run_id)
    if run is None:
        return []
    failing = rows.failing_rows(session)
    acks = acknowledgements(session)
    found = clusters(failing, rows.run_briefs(session), [run_id], acks=acks)
    line = (f"clusters: {len(found)} ({sum(c.new for c in found)} new, "
            f"{sum(c.acknowledged is not None for c in found)} acknowledged; `farm triage {run.name}`)")
    prev = previous_comparable(session, run)
    if prev is None:
        return [line]
    d = diff([r for r in failing if r["run_id"] == prev.id], [r for r in failing if r["run_id"] == run_id],
             rows.fingerprints_run(session, run_id))
    out = [line, f"clusters since {prev.name}: {len(d['appeared'])} appeared, {len(d['gone'])} gone, "
                 f"{len(d['spread'])} spread"]
    out += [f"acknowledged cluster {e['key']} {'gone (probably fixed)' if e['change'] == 'gone' else e['change']}: "
            f"{e['summary'][:100]}" for e in acknowledged_changes(d, acks)]
    return out
