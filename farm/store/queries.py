"""Read queries the CLI, analysis and dashboard need. Plain dicts out."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from farm.errors import RunNotFound
from farm.stages.record import SEVERITY
from farm.store.models import Environment, HarnessRow, OutcomeRow, ResultRow, Run


def resolve_run(session: Session, ref: str | int) -> Run:
    """A run by id, name, ``latest`` or ``previous``."""
    ref = str(ref).strip()
    run = None
    if ref in ("latest", "previous"):
        runs = session.scalars(select(Run).order_by(Run.id.desc()).limit(2)).all()
        idx = 0 if ref == "latest" else 1
        run = runs[idx] if len(runs) > idx else None
    elif ref.isdigit():
        run = session.get(Run, int(ref))
    if run is None:
        run = session.scalar(select(Run).where(Run.name == ref))
    if run is None:
        names = session.scalars(select(Run.name).order_by(Run.id.desc()).limit(5)).all()
        hint = f" (recent: {', '.join(names)})" if names else " (the database has no runs yet: run `farm sweep`)"
        raise RunNotFound(f"no run {ref!r}{hint}")
    return run


def run_dict(session: Session, run: Run, with_counts: bool = True) -> dict[str, Any]:
    env = session.get(Environment, run.environment_id)
    d = {"id": run.id, "name": run.name, "kind": run.kind, "status": run.status,
         "started_at": run.started_at.isoformat() if run.started_at else None,
         "finished_at": run.finished_at.isoformat() if run.finished_at else None,
         "duration_s": (run.finished_at - run.started_at).total_seconds() if run.finished_at else None,
         "catalog": run.catalog, "filters": run.filters, "platforms": run.platforms, "run_on": run.run_on,
         "total": run.total, "stats": run.stats or {},
         "environment": {"jax_version": env.jax_version, "jaxlib_version": env.jaxlib_version,
                         "python": env.python, "host": env.host, "device_kinds": env.device_kinds,
                         "xla_flags": env.xla_flags, "farm_commit": env.farm_commit,
                         "fingerprint": env.fingerprint} if env else {}}
    if with_counts:
        d["done"] = session.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run.id))
        d["status_counts"] = dict(session.execute(
            select(ResultRow.status, func.count()).where(ResultRow.run_id == run.id).group_by(ResultRow.status)).tuples().all())
    return d


def list_runs(session: Session, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
    runs = session.scalars(select(Run).order_by(Run.id.desc()).limit(limit).offset(offset)).all()
    if not runs:
        return []
    ids = [r.id for r in runs]
    done = dict(session.execute(select(OutcomeRow.run_id, func.count()).where(OutcomeRow.run_id.in_(ids))
                                .group_by(OutcomeRow.run_id)).tuples().all())
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for rid, status, n in session.execute(select(ResultRow.run_id, ResultRow.status, func.count())
                                          .where(ResultRow.run_id.in_(ids))
                                          .group_by(ResultRow.run_id, ResultRow.status)):
        counts[rid][status] = n
    out = []
    for r in runs:
        d = run_dict(session, r, with_counts=False)
        d["done"] = done.get(r.id, 0)
        d["status_counts"] = counts.get(r.id, {})
        out.append(d)
    return out


def results(session: Session, run_id: int, *, primitive: str | None = None, dtype: str | None = None,
            platform: str | None = None, status: str | None = None, stage: str | None = None,
            detail: bool = False) -> list[dict[str, Any]]:
    """Flat result rows of a run joined with their harness (stable field names)."""
    q = (select(ResultRow, HarnessRow.name, HarnessRow.fingerprint, HarnessRow.primitive, HarnessRow.dtype,
                HarnessRow.family, HarnessRow.grp, HarnessRow.catalog)
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == run_id))
    for col, val in ((HarnessRow.primitive, primitive), (HarnessRow.dtype, dtype), (ResultRow.platform, platform),
                     (ResultRow.status, status), (ResultRow.stage, stage)):
        if val:
            vals = val.split(",") if isinstance(val, str) else list(val)
            q = q.where(col.in_(vals))
    out = []
    for r, name, fp, prim, dt, fam, grp, cat in session.execute(q.order_by(HarnessRow.name, ResultRow.id)):
        d = {"harness": name, "fingerprint": fp, "primitive": prim, "dtype": dt, "family": fam, "group": grp,
             "catalog": cat, "platform": r.platform, "stage": r.stage, "status": r.status, "seconds": r.seconds,
             "error_type": r.error_type, "error": r.error, "metrics": r.metrics, "facts": r.facts,
             "artifact": r.artifact_sha, "comparable": r.comparable}
        if detail:
            d["detail"] = r.detail
        out.append(d)
    return out


def worst(statuses: list[str]) -> str:
    return max(statuses, key=SEVERITY.__getitem__, default="ok")


def matrix(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, str]]]:
    """harness -> platform -> stage -> status (pure, over ``results`` rows)."""
    m: dict[str, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        m[r["harness"]][r["platform"]][r["stage"]] = r["status"]
    return m


def primitive_matrix(session: Session, run_id: int, by: str = "primitive") -> dict[str, Any]:
    """primitive (or dtype) x platform: worst status and counts per cell, in one query."""
    col = HarnessRow.primitive if by == "primitive" else HarnessRow.dtype
    cells: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    q = (select(col, ResultRow.platform, ResultRow.status, func.count())
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == run_id)
         .group_by(col, ResultRow.platform, ResultRow.status))
    for key, platform, status, n in session.execute(q):
        cells[key][platform][status] += n
    return {k: {p: {"worst": worst(list(c)), "counts": dict(c)} for p, c in v.items()} for k, v in cells.items()}


def summary(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Counter]:
    """(stage, platform) -> Counter of statuses (pure)."""
    out: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in rows:
        out[(r["stage"], r["platform"])][r["status"]] += 1
    return out


def harness_history(session: Session, fingerprint: str, limit: int = 50) -> list[dict[str, Any]]:
    """Every result of one harness across the newest ``limit`` runs, oldest first."""
    h = session.scalar(select(HarnessRow).where(HarnessRow.fingerprint == fingerprint))
    if h is None:
        from farm.errors import HarnessNotFound

        raise HarnessNotFound(f"no harness with fingerprint {fingerprint!r}")
    run_ids = session.scalars(select(ResultRow.run_id).where(ResultRow.harness_id == h.id).distinct()
                              .order_by(ResultRow.run_id.desc()).limit(limit)).all()
    q = (select(ResultRow, Run.name, Run.started_at).join(Run, Run.id == ResultRow.run_id)
         .where(ResultRow.harness_id == h.id, ResultRow.run_id.in_(run_ids)).order_by(ResultRow.run_id))
    return [{"run_id": r.run_id, "run": name, "started_at": at.isoformat() if at else None, "platform": r.platform,
             "stage": r.stage, "status": r.status, "seconds": r.seconds, "metrics": r.metrics, "error": r.error,
             "artifact": r.artifact_sha, "comparable": r.comparable}
            for r, name, at in session.execute(q)]


def harness_by_fingerprint(session: Session, fp: str) -> HarnessRow:
    h = session.scalar(select(HarnessRow).where(HarnessRow.fingerprint == fp))
    if h is None:
        from farm.errors import HarnessNotFound

        raise HarnessNotFound(f"no harness with fingerprint {fp!r}")
    return h
