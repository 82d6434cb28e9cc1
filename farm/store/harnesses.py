"""One harness's rows: its history across runs, its records in one run (with their full
error detail), the runs that have it, and the facts of the artifacts they name.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.errors import HarnessNotFound
from farm.store.models import ArtifactRow, HarnessRow, OutcomeRow, ResultRow, Run
from farm.store.queries import _JsonLoader, _raw_json, mark_reused


def harness_by_fingerprint(session: Session, fp: str) -> HarnessRow:
    h = session.scalar(select(HarnessRow).where(HarnessRow.fingerprint == fp))
    if h is None:

        raise HarnessNotFound(f"no harness with fingerprint {fp!r}")
    return h


def harness_history(session: Session, fingerprint: str, limit: int = 50) -> list[dict[str, Any]]:
    """Every result of one harness across the newest ``limit`` runs, oldest first."""
    h = session.scalar(select(HarnessRow).where(HarnessRow.fingerprint == fingerprint))
    if h is None:

        raise HarnessNotFound(f"no harness with fingerprint {fingerprint!r}")
    run_ids = session.scalars(select(ResultRow.run_id).where(ResultRow.harness_id == h.id).distinct()
                              .order_by(ResultRow.run_id.desc()).limit(limit)).all()
    r = ResultRow
    # plain columns, not ORM rows: 50 runs x ~19 results cost 0.15 s as instances
    q = (select(r.run_id, Run.name, Run.started_at, r.platform, r.stage, r.status, r.seconds, _raw_json(r.metrics),
                r.error, r.artifact_sha, r.comparable).join(Run, Run.id == r.run_id)
         .where(r.harness_id == h.id, r.run_id.in_(run_ids)).order_by(r.run_id, r.id))
    load = _JsonLoader()
    return [{"run_id": rid, "run": name, "started_at": at.isoformat() if at else None, "platform": plat,
             "stage": stage, "status": status, "seconds": sec, "metrics": load(m), "error": err,
             "artifact": sha, "comparable": comp}
            for rid, name, at, plat, stage, status, sec, m, err, sha, comp in session.execute(q).all()]


def harness_results(session: Session, harness_id: int, run_id: int) -> list[dict[str, Any]]:
    """Every record of one harness in one run, with the full error detail."""
    q = (select(ResultRow).where(ResultRow.run_id == run_id, ResultRow.harness_id == harness_id)
         .order_by(ResultRow.id))
    whole = session.scalar(select(OutcomeRow.cached_from).where(OutcomeRow.run_id == run_id,
                                                                 OutcomeRow.harness_id == harness_id))
    out = []
    for r in session.scalars(q):
        d = {"platform": r.platform, "stage": r.stage, "status": r.status, "seconds": r.seconds,
             "error_type": r.error_type, "error": r.error, "detail": r.detail, "metrics": r.metrics,
             "facts": r.facts, "artifact": r.artifact_sha, "comparable": r.comparable, "cached_from": whole}
        mark_reused(d)
        out.append(d)
    return out


def harness_runs(session: Session, harness_id: int, limit: int = 100) -> list[dict[str, Any]]:
    """The runs (newest first) that have results for a harness."""
    ids = (select(ResultRow.run_id).where(ResultRow.harness_id == harness_id).distinct()).scalar_subquery()
    q = select(Run.id, Run.name, Run.started_at).where(Run.id.in_(ids)).order_by(Run.id.desc()).limit(limit)
    return [{"id": i, "name": n, "started_at": at.isoformat() if at else None} for i, n, at in session.execute(q)]


def artifact_info(session: Session, shas: list[str]) -> dict[str, dict[str, Any]]:
    """sha -> kind, size, format version and meta, without loading the bytes."""

    shas = [s for s in dict.fromkeys(shas) if s]
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(shas), 500):
        q = select(ArtifactRow.sha256, ArtifactRow.kind, ArtifactRow.size, ArtifactRow.format_version,
                   ArtifactRow.jax_version, ArtifactRow.meta).where(ArtifactRow.sha256.in_(shas[i:i + 500]))
        for sha, kind, size, fv, jv, meta in session.execute(q):
            out[sha] = {"sha256": sha, "kind": kind, "size": size, "format_version": fv, "jax_version": jv,
                        "meta": meta or {}}
    return out
