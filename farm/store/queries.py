"""Read queries the CLI, analysis and dashboard need. Plain dicts out."""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from sqlalchemy import Text, func, select, type_coerce
from sqlalchemy.orm import Session

from farm.errors import RunNotFound
from farm.results import SYMBOLIC_STAGES, worst_status
from farm.store import deltas, series
from farm.store.models import Environment, HarnessRow, OutcomeRow, ResultRow, Run


def resolve_run(session: Session, ref: str | int) -> Run:
    """A run by id, name, ``latest`` or ``previous``."""
    ref = str(ref).strip()
    run = None
    if ref in ("latest", "previous"):
        runs = session.scalars(select(Run).order_by(Run.id.desc()).limit(2)).all()
        idx = 0 if ref == "latest" else 1
        run = runs[idx] if len(runs) > idx else None
    elif ref.isascii() and ref.isdigit():  # "³".isdigit() too, and int() refuses it
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
         "total": run.total, "stats": run.stats or {}, "dims": series.run_dims(run).to_dict(),
         "environment": {"jax_version": env.jax_version, "jaxlib_version": env.jaxlib_version,
                         "python": env.python, "host": env.host, "device_kinds": env.device_kinds,
                         "xla_flags": env.xla_flags, "farm_commit": env.farm_commit,
                         "fingerprint": env.fingerprint} if env else {}}
    if with_counts:
        d["done"] = done_count(session, run.id)
        d["status_counts"] = dict(session.execute(
            select(ResultRow.status, func.count()).where(ResultRow.run_id == run.id).group_by(ResultRow.status)).tuples().all())
    return d


def done_count(session: Session, run_id: int) -> int:
    """Harnesses with an outcome in a run."""
    return session.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run_id)) or 0


def list_runs(session: Session, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
    runs = session.scalars(select(Run).order_by(Run.id.desc()).limit(limit).offset(offset)).all()
    if not runs:
        return []
    ids = [r.id for r in runs]
    done = deltas.counts(session, ids, "outcomes")
    counts = status_counts(session, ids)
    out = []
    for r in runs:
        d = run_dict(session, r, with_counts=False)
        d["done"] = done[r.id][""]
        d["status_counts"] = counts[r.id]
        out.append(d)
    return out


def results(session: Session, run_id: int, *, primitive: str | None = None, dtype: str | None = None,
            platform: str | None = None, status: str | None = None, stage: str | None = None,
            detail: bool = False) -> list[dict[str, Any]]:
    """Flat result rows of a run joined with their harness (stable field names).

    Plain columns, not ORM objects: a full-catalog run is ~100k rows, and building an
    instance per row cost more than the query itself."""
    r = ResultRow
    cols = [HarnessRow.name, HarnessRow.fingerprint, HarnessRow.primitive, HarnessRow.dtype, HarnessRow.family,
            HarnessRow.grp, HarnessRow.catalog, r.platform, r.stage, r.status, r.seconds, r.error_type, r.error,
            _raw_json(r.metrics), _raw_json(r.facts), r.artifact_sha, r.comparable, OutcomeRow.cached_from] + (
        [r.detail] if detail else [])
    q = (select(*cols).join(HarnessRow, HarnessRow.id == r.harness_id)
         .outerjoin(OutcomeRow, (OutcomeRow.run_id == r.run_id) & (OutcomeRow.harness_id == r.harness_id))
         .where(r.run_id == run_id))
    for col, val in ((HarnessRow.primitive, primitive), (HarnessRow.dtype, dtype), (r.platform, platform),
                     (r.status, status), (r.stage, stage)):
        if val:
            vals = val.split(",") if isinstance(val, str) else list(val)
            q = q.where(col.in_(vals))
    keys = ("harness", "fingerprint", "primitive", "dtype", "family", "group", "catalog", "platform", "stage",
            "status", "seconds", "error_type", "error", "metrics", "facts", "artifact", "comparable",
            "cached_from") + (("detail",) if detail else ())
    load = _JsonLoader()
    out = []
    for row in session.connection().execute(q.order_by(HarnessRow.name, r.id)).all():
        d = dict(zip(keys, row))
        d["metrics"], d["facts"] = load(d["metrics"]), load(d["facts"])
        mark_reused(d)
        out.append(d)
    return out


def mark_reused(d: dict[str, Any]) -> None:
    """Say whether a result row was reused and from which run: ``reused`` is "whole" (the
    outcome was copied by the result cache), "downstream" (re-lowered; compile, execute and
    compare taken from an earlier run) or None; ``reused_from`` is that run's id."""
    whole = d.pop("cached_from", None)
    part = (d.get("facts") or {}).get("reused_from")
    d["reused"] = "whole" if whole else ("downstream" if part else None)
    d["reused_from"] = whole or part


def _raw_json(col: Any) -> Any:
    """A JSON column as the driver returns it (text on SQLite), decoded by ``_JsonLoader``."""
    return type_coerce(col, Text).label(col.key)


class _JsonLoader:
    """Decodes JSON text, once per distinct text: most rows of a run repeat a few metrics
    and facts objects. Each call returns a fresh (shallow) copy, so callers may mutate it,
    unless ``shared``: then equal texts give the same object. Values the driver already
    decoded (PostgreSQL) pass through."""

    def __init__(self, shared: bool = False) -> None:
        self.seen: dict[str, Any] = {}
        self.shared = shared

    def __call__(self, v: Any) -> Any:
        if not isinstance(v, str):
            return v if v is not None else {}
        d = self.seen.get(v)
        if d is None:
            d = self.seen[v] = json.loads(v)
        return d if self.shared or not isinstance(d, dict) else dict(d)


def primitive_matrix(session: Session, run_id: int, by: str = "primitive") -> dict[str, Any]:
    """primitive (or dtype) x platform: worst status and counts per cell, in one query."""
    col = HarnessRow.primitive if by == "primitive" else HarnessRow.dtype
    cells: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    q = (select(col, ResultRow.platform, ResultRow.status, func.count())
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == run_id)
         .group_by(col, ResultRow.platform, ResultRow.status))
    for key, platform, status, n in session.execute(q):
        cells[key][platform][status] += n
    return {k: {p: {"worst": worst_status(list(c)), "counts": dict(c)} for p, c in v.items()} for k, v in cells.items()}






# --------------------------------------------------------------------------- dashboard
# Read queries for the web dashboard. Each is one or two queries however big the run;
# filters are comma lists (or lists) of accepted values, empty means any.
def _in(q: Any, col: Any, val: str | list[str] | tuple[str, ...] | None) -> Any:
    if not val:
        return q
    vals = [v for v in (val.split(",") if isinstance(val, str) else val) if v]
    return q.where(col.in_(vals)) if vals else q


def _run_filters(q: Any, *, primitive: Any = None, dtype: Any = None, platform: Any = None, status: Any = None,
                 catalog: Any = None, stage: Any = None) -> Any:
    for col, val in ((HarnessRow.primitive, primitive), (HarnessRow.dtype, dtype), (ResultRow.platform, platform),
                     (ResultRow.status, status), (HarnessRow.catalog, catalog), (ResultRow.stage, stage)):
        q = _in(q, col, val)
    return q


def filtered_matrix(session: Session, run_id: int, by: str = "primitive", **filters: Any) -> dict[str, Any]:
    """Like ``primitive_matrix`` (``by`` primitive or dtype), restricted by filters; one query."""
    col = HarnessRow.primitive if by == "primitive" else HarnessRow.dtype
    cells: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    q = (select(col, ResultRow.platform, ResultRow.status, func.count())
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == run_id))
    q = _run_filters(q, **filters).group_by(col, ResultRow.platform, ResultRow.status)
    for key, platform, status, n in session.execute(q):
        cells[key][platform][status] += n
    return {k: {p: {"worst": worst_status(list(c)), "counts": dict(c)} for p, c in v.items()} for k, v in cells.items()}


def shapes_filter(q: Any, shapes: str | None) -> Any:
    """``q`` restricted to the records of one kind of shape: ``static`` (every stage but the
    symbolic variant's), ``symbolic`` (``SYMBOLIC_STAGES``); ``both`` or None: unchanged."""
    if shapes == "symbolic":
        return q.where(ResultRow.stage.in_(SYMBOLIC_STAGES))
    if shapes == "static":
        return q.where(ResultRow.stage.not_in(SYMBOLIC_STAGES))
    return q


def run_cells(session: Session, run_id: int, shapes: str | None = None) -> list[tuple[str, str, str, str, str, int]]:
    """(primitive, dtype, catalog, platform, status, results) of a run: one grouped scan from
    which the overview takes its filter values, its matrix and its status counts
    (``values_of``, ``matrix_of``), instead of one scan each. ``shapes``: ``shapes_filter``."""
    q = shapes_filter(select(HarnessRow.primitive, HarnessRow.dtype, HarnessRow.catalog, ResultRow.platform,
                             ResultRow.status, func.count())
                      .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == run_id),
                      shapes)
    q = q.group_by(HarnessRow.primitive, HarnessRow.dtype, HarnessRow.catalog, ResultRow.platform, ResultRow.status)
    return [tuple(r) for r in session.execute(q)]  # type: ignore[misc]


def values_of(cells: list[tuple[str, str, str, str, str, int]]) -> dict[str, list[str]]:
    """``filter_values`` from ``run_cells``."""
    keys = ("primitive", "dtype", "catalog", "platform", "status")
    return {k: sorted({c[keys.index(k)] for c in cells}) for k in ("primitive", "dtype", "platform", "status", "catalog")}


def matrix_of(cells: list[tuple[str, str, str, str, str, int]], by: str = "primitive",
              **filters: Any) -> dict[str, Any]:
    """``filtered_matrix`` from ``run_cells`` (filters: lists or comma-separated strings, as there)."""
    keys = ("primitive", "dtype", "catalog", "platform", "status")
    wanted = {keys.index(k): vals for k, v in filters.items()
              if v and (vals := {x for x in (v.split(",") if isinstance(v, str) else v) if x})}
    col = keys.index(by)
    out: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for c in cells:
        if all(c[i] in vals for i, vals in wanted.items()):
            out[c[col]][c[3]][c[4]] += c[5]
    return {k: {p: {"worst": worst_status(list(n)), "counts": dict(n)} for p, n in v.items()} for k, v in out.items()}


def status_of(cells: list[tuple[str, str, str, str, str, int]]) -> dict[str, int]:
    """``run_dict``'s ``status_counts`` from ``run_cells``."""
    out: Counter = Counter()
    for c in cells:
        out[c[4]] += c[5]
    return dict(out)


def filter_values(session: Session, run_id: int) -> dict[str, list[str]]:
    """The distinct primitives, dtypes, platforms, statuses and catalogs of a run (one query)."""
    q = (select(HarnessRow.primitive, HarnessRow.dtype, HarnessRow.catalog, ResultRow.platform, ResultRow.status)
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == run_id).distinct())
    sets: dict[str, set[str]] = defaultdict(set)
    for prim, dt, cat, plat, st in session.execute(q):
        sets["primitive"].add(prim)
        sets["dtype"].add(dt)
        sets["catalog"].add(cat)
        sets["platform"].add(plat)
        sets["status"].add(st)
    return {k: sorted(sets[k]) for k in ("primitive", "dtype", "platform", "status", "catalog")}


def harness_page(session: Session, run_id: int, *, limit: int = 100, offset: int = 0, shapes: str | None = None,
                 **filters: Any) -> tuple[int, list[dict[str, Any]]]:
    """(total, harnesses) of a run matching filters, each with its worst status per platform
    (over the records of ``shapes``: ``shapes_filter``).

    Paginated by harness: one query for the page's harness ids (and the total), one for their results."""
    base = (select(HarnessRow.id).join(ResultRow, HarnessRow.id == ResultRow.harness_id)
            .where(ResultRow.run_id == run_id))
    base = shapes_filter(_run_filters(base, **filters), shapes).distinct()
    total = session.scalar(select(func.count()).select_from(base.subquery())) or 0
    ids = session.scalars(select(HarnessRow.id).where(HarnessRow.id.in_(base.scalar_subquery()))
                          .order_by(HarnessRow.name).limit(limit).offset(offset)).all()
    if not ids:
        return total, []
    out: dict[int, dict[str, Any]] = {}
    q = shapes_filter(select(HarnessRow.id, HarnessRow.name, HarnessRow.fingerprint, HarnessRow.primitive,
                             HarnessRow.dtype, HarnessRow.catalog, ResultRow.platform, ResultRow.status)
                      .join(ResultRow, HarnessRow.id == ResultRow.harness_id)
                      .where(ResultRow.run_id == run_id, HarnessRow.id.in_(ids)), shapes)
    per: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for hid, name, fp, prim, dt, cat, plat, st in session.execute(q):
        out.setdefault(hid, {"name": name, "fingerprint": fp, "primitive": prim, "dtype": dt, "catalog": cat})
        per[hid][plat].append(st)
    rows = sorted(out.items(), key=lambda kv: kv[1]["name"])
    return total, [{**h, "platforms": {p: worst_status(s) for p, s in per[hid].items()}} for hid, h in rows]








def coverage(session: Session, run_id: int, **filters: Any) -> dict[str, Any]:
    """primitive x dtype x platform: worst status and counts (one query), plus the stale
    limitations (``unexpected_pass`` results: expected to fail, now pass) (one query)."""
    cells: dict[tuple[str, str], dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    q = (select(HarnessRow.primitive, HarnessRow.dtype, ResultRow.platform, ResultRow.status, func.count())
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == run_id))
    q = _run_filters(q, **filters).group_by(HarnessRow.primitive, HarnessRow.dtype, ResultRow.platform,
                                            ResultRow.status)
    for prim, dt, plat, st, n in session.execute(q):
        cells[(prim, dt)][plat][st] += n
    rows = [{"primitive": p, "dtype": d,
             "platforms": {pl: {"worst": worst_status(list(c)), "counts": dict(c)} for pl, c in v.items()}}
            for (p, d), v in sorted(cells.items())]
    sq = (select(HarnessRow.name, HarnessRow.fingerprint, HarnessRow.primitive, HarnessRow.dtype,
                 ResultRow.platform, ResultRow.stage, ResultRow.error)
          .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
          .where(ResultRow.run_id == run_id, ResultRow.status == "unexpected_pass"))
    sq = _run_filters(sq, **{k: v for k, v in filters.items() if k != "status"}).order_by(HarnessRow.name)
    stale = [{"harness": n, "fingerprint": fp, "primitive": p, "dtype": d, "platform": pl, "stage": st,
              "error": e} for n, fp, p, d, pl, st, e in session.execute(sq)]
    return {"rows": rows, "stale": stale}


def boundary(session: Session, run_id: int, **filters: Any) -> list[dict[str, Any]]:
    """Census records of a run whose module has non-StableHLO ops or unguaranteed custom
    calls, per harness and platform (one query; the JSON facts are filtered here)."""
    q = (select(HarnessRow.name, HarnessRow.fingerprint, HarnessRow.primitive, HarnessRow.dtype,
                ResultRow.platform, ResultRow.status, ResultRow.facts)
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
         .where(ResultRow.run_id == run_id, ResultRow.stage == "census"))
    q = _run_filters(q, **filters).order_by(HarnessRow.name, ResultRow.platform)
    out = []
    for name, fp, prim, dt, plat, st, facts in session.execute(q):
        facts = facts or {}
        ops, unguaranteed = list(facts.get("non_stablehlo") or []), list(facts.get("unguaranteed") or [])
        if ops or unguaranteed:
            out.append({"harness": name, "fingerprint": fp, "primitive": prim, "dtype": dt, "platform": plat,
                        "status": st, "non_stablehlo": ops, "unguaranteed": unguaranteed,
                        "custom_calls": list(facts.get("custom_calls") or []),
                        "limitation": facts.get("limitation")})
    return out


def count_runs(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Run)) or 0


def stage_counts(session: Session, run_id: int) -> list[tuple[str, str, str, int]]:
    """(stage, platform, status, results) for a run, one grouped query."""
    q = (select(ResultRow.stage, ResultRow.platform, ResultRow.status, func.count())
         .where(ResultRow.run_id == run_id)
         .group_by(ResultRow.stage, ResultRow.platform, ResultRow.status))
    return [tuple(r) for r in session.execute(q)]


def census_facts(session: Session, run_id: int) -> list[dict[str, Any]]:
    """Every census record's platform, status and facts (one query)."""
    q = (select(HarnessRow.name, HarnessRow.primitive, ResultRow.platform, ResultRow.status, ResultRow.facts)
         .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
         .where(ResultRow.run_id == run_id, ResultRow.stage == "census"))
    return [{"harness": n, "primitive": p, "platform": pl, "status": st, "facts": f or {}}
            for n, p, pl, st, f in session.execute(q)]


# --------------------------------------------------------------------------- comparison reports
def comparison_rows(session: Session, run_id: int) -> list[dict[str, Any]]:
    """A run's result rows with only the fields ``farm.analysis.report`` reads, in no order.

    About a third faster than ``results`` on a full-catalog run: no ordering, fewer
    columns, and each distinct metrics or facts text is decoded once and the decoded
    object shared by every row that has it, so callers must not mutate ``metrics`` or
    ``facts`` (the analysis does not)."""
    r = ResultRow
    q = (select(HarnessRow.name, HarnessRow.fingerprint, HarnessRow.primitive, HarnessRow.dtype, r.platform,
                r.stage, r.status, r.seconds, r.error_type, r.error, _raw_json(r.metrics), _raw_json(r.facts))
         .join(HarnessRow, HarnessRow.id == r.harness_id).where(r.run_id == run_id))
    load = _JsonLoader(shared=True)
    return [{"harness": name, "fingerprint": fp, "primitive": prim, "dtype": dt, "platform": plat, "stage": stage,
             "status": status, "seconds": sec, "error_type": et, "error": err, "metrics": load(m), "facts": load(f)}
            for name, fp, prim, dt, plat, stage, status, sec, et, err, m, f in session.connection().execute(q).all()]


def status_counts(session: Session, run_ids: list[int]) -> dict[int, dict[str, int]]:
    """run id -> status -> results, for several runs (``deltas.counts``: two or three grouped queries)."""
    return {rid: dict(c) for rid, c in deltas.counts(session, list(run_ids)).items()}

