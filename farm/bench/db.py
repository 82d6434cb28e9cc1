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
from datetime import timedelta
from typing import Any

from sqlalchemy import func, insert, select

from farm.errors import ConfigError

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
    from farm.results import SEVERITY

    return max(a, b, key=SEVERITY.__getitem__)


def _check_exists(url: str) -> None:
    """A SQLite source that is not there would be created empty: say so instead."""
    from pathlib import Path

    from sqlalchemy.engine import make_url

    try:
        u = make_url(url)
    except Exception:
        return  # open_store gives the clear error
    if u.drivername.startswith("sqlite") and u.database and u.database != ":memory:" \
            and not Path(u.database).expanduser().exists():
        raise ConfigError(f"source database {url!r} does not exist")


def make_db(src_url: str, dst_url: str, *, runs: int = 10, src_run: str = "latest", seed: int = 0,
            noise: float = 0.05, step_fraction: float = 0.01, flip_fraction: float = 0.002,
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

    Returns:
      ``{"source": name, "runs": [ids], "results": n, "outcomes": n, "artifacts": n,
      "harnesses": n, "seconds": s}``.

    Raises:
      ConfigError: ``runs`` < 1, or the destination already has these run names.
      RunNotFound: no such source run.
    """
    from farm.store import open_store, queries, writes
    from farm.store.models import ArtifactRow, Environment, HarnessRow, OutcomeRow, ResultRow, Run

    if runs < 1:
        raise ConfigError(f"'runs' must be at least 1, got {runs}")
    _check_exists(src_url)
    t0 = time.perf_counter()
    rng = random.Random(seed)
    src = open_store(src_url, upgrade=False)
    dst = open_store(dst_url)
    try:
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
        names = [f"{src_name}-r{i + 1:02d}" for i in range(runs)]
        log(f"benchdb: {len(results)} results, {len(outcomes)} outcomes, {len(shas)} artifacts of run "
            f"{src_name} -> {runs} runs")

        with dst.session() as s:
            clash = s.scalars(select(Run.name).where(Run.name.in_(names))).all()
            if clash:
                raise ConfigError(f"{dst_url} already has run(s) {', '.join(clash)}; use an empty database")
            env_id = s.scalar(select(Environment.id).where(Environment.fingerprint == env_cols["fingerprint"]))
            if env_id is None:
                row = Environment(**env_cols)
                s.add(row)
                s.flush()
                env_id = row.id
            fp_ids = writes.harness_ids(s, list(defs.values()))
            hid = {src_hid: fp_ids[d["fingerprint"]] for src_hid, d in defs.items()}
            have = set()
            wanted = sorted(shas)
            for i in range(0, len(wanted), 500):
                have |= set(s.scalars(select(ArtifactRow.sha256).where(ArtifactRow.sha256.in_(wanted[i:i + 500]))))
            missing = [x for x in wanted if x not in have]
        acols = list(ArtifactRow.__table__.c)
        for i in range(0, len(missing), 200):
            with src.engine.connect() as sc:
                rows = [dict(r) for r in sc.execute(select(*acols).where(
                    ArtifactRow.sha256.in_(missing[i:i + 200]))).mappings()]
            with dst.engine.begin() as dc:
                if rows:
                    dc.execute(insert(ArtifactRow.__table__), rows)

        step_hids = {h for h in sorted(hid) if rng.random() < step_fraction}
        step_from = runs // 2
        flip_rows = {i for i, r in enumerate(results)
                     if r["stage"] == "execute" and r["status"] == "ok" and rng.random() < flip_fraction}
        flip_hids = {results[i]["harness_id"] for i in flip_rows}
        span = (run_cols["finished_at"] - run_cols["started_at"]) if run_cols["finished_at"] else timedelta(0)
        run_ids: list[int] = []
        for n, name in enumerate(names):
            started = run_cols["started_at"] - timedelta(days=runs - 1 - n)
            stepped = n >= step_from
            last = n == runs - 1
            with dst.session() as s:
                new = Run(name=name, kind=run_cols["kind"], status="finished", started_at=started,
                          finished_at=started + span, catalog=run_cols["catalog"], filters=run_cols["filters"],
                          platforms=run_cols["platforms"], run_on=run_cols["run_on"], total=run_cols["total"],
                          environment_id=env_id, stats={**(run_cols["stats"] or {}), "replicated_from": src_name,
                                                        "replica": n + 1, "seed": seed})
                s.add(new)
                s.flush()
                rid = new.id
                factors: dict[int, float] = {}
                rows = []
                for i, r in enumerate(results):
                    f = math.exp(rng.gauss(0.0, noise))
                    if stepped and r["harness_id"] in step_hids and r["stage"] in STEP_STAGES:
                        f *= STEP_FACTOR
                    factors[r["harness_id"]] = factors.get(r["harness_id"], 0.0) + (r["seconds"] or 0.0) * (f - 1)
                    row = {**r, "run_id": rid, "harness_id": hid[r["harness_id"]],
                           "seconds": (r["seconds"] or 0.0) * f, "metrics": _jitter(r["metrics"] or {}, f)}
                    if last and i in flip_rows:
                        row.update(status="fail", error_type="AssertionError",
                                   error="benchdb: planted status flip (ok -> fail)")
                    rows.append(row)
                for i in range(0, len(rows), 5000):
                    s.connection().execute(insert(ResultRow.__table__), rows[i:i + 5000])
                s.connection().execute(insert(OutcomeRow.__table__), [
                    {"run_id": rid, "harness_id": hid[o["harness_id"]], "environment_id": env_id,
                     "worst": _worse(o["worst"], "fail") if last and o["harness_id"] in flip_hids else o["worst"],
                     "seconds": max(0.0, (o["seconds"] or 0.0) + factors.get(o["harness_id"], 0.0)),
                     "worker": o["worker"]} for o in outcomes])
            run_ids.append(rid)
            log(f"benchdb: run {name} (id {rid}): {len(rows)} results")
        with dst.session() as s:
            n_results = s.scalar(select(func.count()).select_from(ResultRow).where(ResultRow.run_id.in_(run_ids)))
        return {"source": src_name, "runs": run_ids, "results": n_results, "outcomes": len(outcomes) * runs,
                "artifacts": len(missing), "harnesses": len(hid), "step_harnesses": len(step_hids),
                "flips": len(flip_rows), "seconds": round(time.perf_counter() - t0, 2)}
    finally:
        src.dispose()
        dst.dispose()
