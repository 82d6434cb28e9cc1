"""A benchmark database for the dashboard: N runs made by replicating one real sweep.

The benchmarks issue asks for page timings on "10 runs of the full upstream catalog x 4
platforms". Sweeping the catalog ten times costs hours, so ``make_db`` copies the result
and outcome rows of one real run under N new run ids instead. Every row keeps its real
statuses, errors, facts and artifacts; only the timings change, from a seeded RNG, so
that ``farm compare`` and the compare page have something to find:

- every timing (a row's ``seconds``, every ``*_s`` metric) is scaled by
  ``exp(N(0, noise))`` per run and row (noise 5% by default);
- a fixed ``step_fraction`` of harnesses (1%) get 1.5x slower lower, compile and
  execute timings from the middle run on (a step the history method sees);
- in the last run a ``flip_fraction`` of the ``ok`` execute records (0.2%) become
  ``fail`` (status regressions for the compare page).

Runs are spaced a day apart, ending at the source run's start. Artifacts are
content-addressed and shared by every copy, as they would be after real sweeps.
Writes are SQLAlchemy core bulk inserts in one transaction per run.

Example::

    from farm.bench.db import make_db
    make_db("sqlite:////tmp/farm-upstream.db", "sqlite:////tmp/farm-bench.db", runs=10)
"""
from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.engine import make_url

from farm.errors import ConfigError
from farm.results import worst_status
from farm.store import open_store, queries, writes
from farm.store.models import ArtifactRow, Environment, HarnessRow, OutcomeRow, ResultRow, Run, StoredOutcomeRow, StoredResultRow

#: Stages whose timings take part in the planted step.
STEP_STAGES = ("lower", "compile", "execute")
STEP_FACTOR = 1.5


def _jitter(metrics: dict[str, Any], factor: float) -> dict[str, Any]:
    """``metrics`` with every finite ``*_s`` number scaled by ``factor``."""
    out = dict(metrics)
    for k, v in metrics.items():
        if k.endswith("_s") and isinstance(v, (int, float)) and math.isfinite(v):
            out[k] = v * factor
    return out


def _worse(a: str, b: str) -> str:

    return worst_status((a, b))


def _check_exists(url: str) -> None:
    """A SQLite source that is not there would be created empty: say so instead."""

    try:
        u = make_url(url)
    except Exception:
        return  # open_store gives the clear error
    if u.drivername.startswith("sqlite") and u.database and u.database != ":memory:" \
            and not Path(u.database).expanduser().exists():
        raise ConfigError(f"source database {url!r} does not exist")


@dataclass
class _Source:
    """The source run, read once: everything the copies repeat (timings are varied later)."""

    name: str
    id: int
    run_cols: dict[str, Any]
    env_cols: dict[str, Any]
    defs: dict[int, dict[str, Any]]
    results: list[dict[str, Any]]
    outcomes: list[dict[str, Any]]
    shas: set[str]


@dataclass
class _Plan:
    """The destination ids and the seeded variations shared by every copy."""

    runs: int
    seed: int
    noise: float
    rng: random.Random
    env_id: int
    hid: dict[int, int]
    step_hids: set[int]
    step_from: int
    flip_rows: set[int]
    flip_hids: set[int]
    #: delta-stored copies: every copy after the first names the first as its base and stores only the harnesses that differ
    delta: bool = False
    base_id: int | None = None


def _read_source(src: Any, src_run: str) -> _Source:
    """Read the source run's rows in one session, so the copies never go back to it (but for artifacts)."""

    with src.session() as s:
        run = queries.resolve_run(s, src_run)
        env = s.get(Environment, run.environment_id)
        run_cols = {c: getattr(run, c) for c in ("kind", "catalog", "filters", "platforms", "run_on", "total",
                                                  "stats", "started_at", "finished_at")}
        src_name, src_id = run.name, run.id
        env_cols = {c: getattr(env, c) for c in ("fingerprint", "jax_version", "jaxlib_version", "python", "host",
                                                  "device_kinds", "xla_flags", "farm_commit")}
        defs = dict(s.execute(select(HarnessRow.id, HarnessRow.definition).where(
            HarnessRow.id.in_(select(OutcomeRow.harness_id).where(OutcomeRow.run_id == src_id)))).tuples().all())
        rcols = [c for c in ResultRow.__table__.c if c.name not in ("id", "run_id")]
        results = [dict(r) for r in s.execute(select(*rcols).where(ResultRow.run_id == src_id)
                                              .order_by(ResultRow.id)).mappings()]
        outcomes = [dict(r) for r in s.execute(
            select(OutcomeRow.harness_id, OutcomeRow.worst, OutcomeRow.seconds, OutcomeRow.worker)
            .where(OutcomeRow.run_id == src_id)).mappings()]
        shas = {r["artifact_sha"] for r in results if r["artifact_sha"]}
        shas |= {r["facts"].get("module_sha256") for r in results if (r["facts"] or {}).get("module_sha256")}
    return _Source(src_name, src_id, run_cols, env_cols, defs, results, outcomes, shas)


def _prepare_dest(dst: Any, dst_url: str, names: list[str], source: _Source) -> tuple[int, dict[int, int], list[str]]:
    """Refuse a destination that has these run names; find or add the environment and harnesses.

    Returns ``(environment id, {source harness id: destination id}, artifact shas it lacks)``;
    only the missing artifacts are copied, since they are content-addressed and shared."""

    with dst.session() as s:
        clash = s.scalars(select(Run.name).where(Run.name.in_(names))).all()
        if clash:
            raise ConfigError(f"{dst_url} already has run(s) {', '.join(clash)}; use an empty database")
        env_id = s.scalar(select(Environment.id).where(Environment.fingerprint == source.env_cols["fingerprint"]))
        if env_id is None:
            row = Environment(**source.env_cols)
            s.add(row)
            s.flush()
            env_id = row.id
        fp_ids = writes.harness_ids(s, list(source.defs.values()))
        hid = {src_hid: fp_ids[d["fingerprint"]] for src_hid, d in source.defs.items()}
        have = set()
        wanted = sorted(source.shas)
        for i in range(0, len(wanted), 500):
            have |= set(s.scalars(select(ArtifactRow.sha256).where(ArtifactRow.sha256.in_(wanted[i:i + 500]))))
        missing = [x for x in wanted if x not in have]
    return env_id, hid, missing


def _copy_artifacts(src: Any, dst: Any, missing: list[str]) -> None:
    """Copy the missing artifact rows in batches of 200, to bound memory (artifacts are the big rows)."""

    acols = list(ArtifactRow.__table__.c)
    for i in range(0, len(missing), 200):
        with src.engine.connect() as sc:
            rows = [dict(r) for r in sc.execute(select(*acols).where(
                ArtifactRow.sha256.in_(missing[i:i + 200]))).mappings()]
        with dst.engine.begin() as dc:
            if rows:
                dc.execute(insert(ArtifactRow.__table__), rows)


def _replica_results(source: _Source, plan: _Plan, rid: int, stepped: bool, last: bool,
                     only: set[int] | None = None) -> tuple[list[dict[str, Any]], dict[int, float]]:
    """One copy's result rows with jittered (and maybe stepped or flipped) timings.

    Also returns each source harness's added seconds, so its outcome's total moves with its results."""
    factors: dict[int, float] = {}
    rows = []
    for i, r in enumerate(source.results):
        if only is not None and r["harness_id"] not in only:
            continue
        f = math.exp(plan.rng.gauss(0.0, plan.noise))
        if stepped and r["harness_id"] in plan.step_hids and r["stage"] in STEP_STAGES:
            f *= STEP_FACTOR
        factors[r["harness_id"]] = factors.get(r["harness_id"], 0.0) + (r["seconds"] or 0.0) * (f - 1)
        row = {**r, "run_id": rid, "harness_id": plan.hid[r["harness_id"]],
               "seconds": (r["seconds"] or 0.0) * f, "metrics": _jitter(r["metrics"] or {}, f)}
        if last and i in plan.flip_rows:
            row.update(status="fail", error_type="AssertionError",
                       error="benchdb: planted status flip (ok -> fail)")
        rows.append(row)
    return rows, factors


def _write_replica(dst: Any, source: _Source, plan: _Plan, n: int, name: str) -> tuple[int, int]:
    """Write copy ``n`` (run, results, outcomes) in one transaction; returns ``(run id, result rows)``.

    Copies are dated a day apart, ending at the source run's start, so history pages order them."""

    run_cols = source.run_cols
    span = (run_cols["finished_at"] - run_cols["started_at"]) if run_cols["finished_at"] else timedelta(0)
    started = run_cols["started_at"] - timedelta(days=plan.runs - 1 - n)
    last = n == plan.runs - 1
    with dst.session() as s:
        new = Run(name=name, kind=run_cols["kind"], status="finished", started_at=started,
                  finished_at=started + span, catalog=run_cols["catalog"], filters=run_cols["filters"],
                  platforms=run_cols["platforms"], run_on=run_cols["run_on"], total=run_cols["total"],
                  environment_id=plan.env_id, stats={**(run_cols["stats"] or {}), "replicated_from": source.name,
                                                     "replica": n + 1, "seed": plan.seed})
        s.add(new)
        s.flush()
        rid = new.id
        changed = None
        if plan.delta and plan.base_id is not None:  # only the harnesses this copy changes
            changed = (plan.step_hids if n >= plan.step_from else set()) | (plan.flip_hids if last else set())
        rows, factors = _replica_results(source, plan, rid, n >= plan.step_from, last, changed)
        outcomes = source.outcomes
        if changed is not None:
            outcomes = [o for o in outcomes if o["harness_id"] in changed]
            new.base_run_id = plan.base_id
            s.flush()
        for i in range(0, len(rows), 5000):
            s.connection().execute(insert(StoredResultRow.__table__), rows[i:i + 5000])
        s.connection().execute(insert(StoredOutcomeRow.__table__), [
            {"run_id": rid, "harness_id": plan.hid[o["harness_id"]], "environment_id": plan.env_id,
             "worst": _worse(o["worst"], "fail") if last and o["harness_id"] in plan.flip_hids else o["worst"],
             "seconds": max(0.0, (o["seconds"] or 0.0) + factors.get(o["harness_id"], 0.0)),
             "worker": o["worker"]} for o in outcomes]) if outcomes else None
    if plan.delta and plan.base_id is None:
        plan.base_id = rid
    return rid, len(rows)


def make_db(src_url: str, dst_url: str, *, runs: int = 10, src_run: str = "latest", seed: int = 0,
            noise: float = 0.05, step_fraction: float = 0.01, flip_fraction: float = 0.002, delta: bool = False,
            log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> dict[str, Any]:
    """Copy the results of one run of ``src_url`` into ``runs`` new runs of ``dst_url``.

    Args:
      src_url: the database holding a real sweep (opened without migrating it).
      dst_url: the database to fill (created and migrated if needed); it must not already
        hold runs named like the copies.
      runs: how many copies (at least 1).
      src_run: which source run (id, name, ``latest`` or ``previous``).
      seed: the RNG seed; the same seed gives the same database.
      noise, step_fraction, flip_fraction: the variations (see the module docstring).
      delta: store copies 2.. as delta runs of copy 1 (``farm.store.deltas``): nightlies whose
        results were reused whole, so no timing noise; each stores only its stepped and flipped
        harnesses.

    Returns:
      ``{"source": name, "runs": [ids], "results": n, "outcomes": n, "artifacts": n,
      "harnesses": n, "seconds": s}``.

    Raises:
      ConfigError: ``runs`` < 1, or the destination already has these run names.
      RunNotFound: no such source run.
    """

    if runs < 1:
        raise ConfigError(f"'runs' must be at least 1, got {runs}")
    _check_exists(src_url)
    t0 = time.perf_counter()
    rng = random.Random(seed)
    src = open_store(src_url, upgrade=False)
    dst = open_store(dst_url)
    try:
        source = _read_source(src, src_run)
        names = [f"{source.name}-r{i + 1:02d}" for i in range(runs)]
        log(f"benchdb: {len(source.results)} results, {len(source.outcomes)} outcomes, {len(source.shas)} "
            f"artifacts of run {source.name} -> {runs} runs")
        env_id, hid, missing = _prepare_dest(dst, dst_url, names, source)
        _copy_artifacts(src, dst, missing)
        # The draws' order (step harnesses, flipped rows, then each copy's jitter) fixes the database per seed.
        step_hids = {h for h in sorted(hid) if rng.random() < step_fraction}
        flip_rows = {i for i, r in enumerate(source.results)
                     if r["stage"] == "execute" and r["status"] == "ok" and rng.random() < flip_fraction}
        plan = _Plan(runs, seed, 0.0 if delta else noise, rng, env_id, hid, step_hids, runs // 2, flip_rows,
                     {source.results[i]["harness_id"] for i in flip_rows}, delta)
        run_ids: list[int] = []
        for n, name in enumerate(names):
            rid, n_rows = _write_replica(dst, source, plan, n, name)
            run_ids.append(rid)
            log(f"benchdb: run {name} (id {rid}): {n_rows} results")
        with dst.session() as s:
            n_results = s.scalar(select(func.count()).select_from(ResultRow).where(ResultRow.run_id.in_(run_ids)))
        return {"source": source.name, "runs": run_ids, "results": n_results, "outcomes": len(source.outcomes) * runs,
                "artifacts": len(missing), "harnesses": len(hid), "step_harnesses": len(step_hids),
                "flips": len(flip_rows), "seconds": round(time.perf_counter() - t0, 2)}
    finally:
        src.dispose()
        dst.dispose()
