"""The benchmark suite behind ``farm bench``: each figure timed with warm-up and repeats,
and ratios measured in the same run against a baseline path so machine noise cancels.

Figures (goals from the benchmarks issue):
- catalog import + select (farm, upstream)                       goal < 2 s
- per-harness cost: farm pipeline vs a naive serial loop doing the same JAX work
- sweep throughput on Ray, 2 workers vs 1                        goal ≥ 1.8x
- warm re-sweep (nothing changed, result cache)                  goal ≤ 10 s full catalog
- farm overhead per harness (sweep wall − worker time / workers) goal ≤ 2 ms
  (trivial catalog, ``harnesses/trivial.py``; slope between two sweep sizes)
- peak RSS per worker                                            goal ≤ 2 GB
- run-matrix and results queries                                 goal ≤ 300 ms
- dashboard overview / trends / compare / harness / search pages,
  server time with the page cache emptied                        goal ≤ 300 ms
  (on a database given with ``--dashboard-db``, e.g. one made by ``farm.bench.db``)
- load test: 20 loopback clients over those pages, ``farm serve`` goal p95 ≤ 500 ms, no errors
- SQLite file after 30 unchanged nightlies against one run's bytes, and after ``farm db prune``
  and VACUUM (``storage_figures``; not in the quick default)
- a cold sweep of the api catalog                                 goal ≤ 600 s, no bad record
- cold sweeps with and without ``--vjp`` (goal ≤ 1.5x), ``--compositions`` (≤ 1.3x), ``--check-determinism``
  (``check_figures``); not in the quick default

Figures come in groups (``GROUPS``); ``run(only=...)`` picks some.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from farm.stages import compat
from farm.errors import ConfigError
from farm.results import Options
from farm.bench.figure import Figure, table  # noqa: F401  (farm bench prints the table)


def timed(fn: Callable[[], Any], repeats: int = 3, warmup: int = 1) -> tuple[float, float, float]:
    """(median, min, max) seconds."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts)


def naive_loop(harnesses: list[Any]) -> float:
    """What a person would write without the farm: every stage, serially, no dedup."""
    import jax  # deferred: jax; farm --help imports this module for GROUPS

    from farm.stages.trace import jitted  # deferred: jax via farm.stages; not needed by farm --help

    t0 = time.perf_counter()
    for h in harnesses:
        args = h.make_args()
        with compat.enable_x64(h.needs_x64):
            jf, dyn = jitted(h, args)
            tr = jf.trace(*dyn)
            lows = [tr.lower(lowering_platforms=(p,)) for p in ("cpu", "cuda", "rocm", "tpu")]
            exp = compat.jax_export().export(jf, platforms=("cpu", "cuda", "rocm", "tpu"))(*dyn)
            compat.jax_export().deserialize(exp.serialize())
            out = lows[0].compile()(*dyn)
            jax.block_until_ready(out)
    return time.perf_counter() - t0


def _subprocess_seconds(code: str) -> float:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, capture_output=True,
                   env={**os.environ, "PYTHONPATH": root})
    return time.perf_counter() - t0


GROUPS = ("catalog", "pipeline", "sweep", "overhead", "fleet", "dashboard", "load", "full", "api", "storage", "symbolic",
          "gradients", "compositions", "determinism")


def run(quick: bool = True, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr), *,
        only: tuple[str, ...] = (), dashboard_db: str | None = None) -> list[Figure]:
    """Every figure group in ``only`` (default: all). ``dashboard_db`` is the database the
    dashboard figures read (see ``farm.bench.db``); without one they are skipped."""

    for g in only:
        if g not in GROUPS:
            raise ConfigError(f"unknown figure group {g!r} (valid: {', '.join(GROUPS)})")
    want = set(only or GROUPS)
    figs: list[Figure] = []
    if "catalog" in want:
        figs += catalog_figures(quick, log)
    if "pipeline" in want:
        figs += pipeline_figures(quick, log)
    if "sweep" in want:
        figs += sweep_figures(quick, log)
    if "overhead" in want:
        figs += overhead_figures(quick, log)
    if "fleet" in want:
        from farm.bench.fleet_figures import fleet_figures  # deferred: ray and the fleet, only here

        figs += fleet_figures(quick, log)
    if "full" in want and not quick:
        figs += full_catalog_figures(log)
    if "api" in want and (not quick or "api" in only):  # a cold sweep of the api catalog: minutes
        figs += api_catalog_figures(log)
    if "storage" in want and (not quick or "storage" in only):  # 30 re-sweeps: minutes, not in the quick default
        from farm.bench.storage_figures import storage_figures  # deferred: the sweep, only here

        figs += storage_figures(quick, log)
    if "symbolic" in want and (not quick or "symbolic" in only):  # cold sweeps of the upstream catalog: minutes
        from farm.bench.symbolic_figures import symbolic_figures  # deferred: only here

        figs += symbolic_figures(quick, log)
    for group in ("gradients", "compositions", "determinism"):
        if group in want and (not quick or group in only):  # cold sweeps with and without the check: minutes
            from farm.bench.check_figures import check_figures  # deferred: only here

            figs += check_figures(group, quick, log)
    if "dashboard" in want:
        from farm.bench.web_figures import dashboard_figures  # deferred: the dashboard's modules, only here

        if dashboard_db:
            figs += dashboard_figures(dashboard_db, repeats=3 if quick else 7, log=log)
        else:
            log("bench: dashboard figures skipped: pass --dashboard-db URL (a database made with "
                "`farm bench --make-db SRC DST`)")
    if "load" in want and dashboard_db:
        from farm.bench.web_figures import load_figures  # deferred: as above

        figs += load_figures(dashboard_db, quick, log)
    return figs


def catalog_figures(quick: bool, log: Callable[[str], None]) -> list[Figure]:
    figs: list[Figure] = []
    log("bench: catalog import + select")
    for cat in ("farm", "upstream"):
        secs = [_subprocess_seconds(f"from farm import catalog; catalog.select(catalog.Filters(catalog='{cat}', "
                                    f"dtype=('float32',)))") for _ in range(2 if quick else 3)]
        figs.append(Figure(f"catalog import+select ({cat}, fresh process)", statistics.median(secs), "s", 2.0,
                           spread=f"{min(secs):.2f}-{max(secs):.2f}"))
    return figs


def pipeline_figures(quick: bool, log: Callable[[str], None]) -> list[Figure]:
    from farm import catalog  # deferred: farm.catalog; not needed by farm --help
    from farm.pipeline import clear_caches, run_harness  # deferred: farm.pipeline (jax); not needed by farm --help

    n = 24 if quick else 120
    subset = catalog.select(catalog.Filters(catalog="farm", dtype=("float32", "int32")))[:n]
    log(f"bench: naive serial loop vs farm pipeline on {len(subset)} harnesses")

    def cold(fn: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: (clear_caches(), fn())

    def farm_path() -> None:  # as a worker runs it: with the shared MLIR context (farm.pipeline.irctx)
        from farm.pipeline import irctx  # deferred: farm.pipeline (jax); not needed by farm --help

        irctx.install()
        try:
            [run_harness(h, Options()) for h in subset]
        finally:
            irctx.uninstall()

    naive = timed(cold(lambda: naive_loop(subset)), repeats=1 if quick else 3)
    farm_t = timed(cold(farm_path), repeats=1 if quick else 3)
    return [Figure("naive loop, per harness", 1000 * naive[0] / len(subset), "ms"),
            Figure("farm pipeline (all stages + census + crossexec), per harness",
                   1000 * farm_t[0] / len(subset), "ms", 1000 * 1.5 * naive[0] / len(subset),
                   spread="goal: ≤1.5x the naive loop's JAX work")]


def sweep_figures(quick: bool, log: Callable[[str], None]) -> list[Figure]:
    import ray  # deferred: ray; not needed by farm --help

    from farm import catalog  # deferred: farm.catalog; not needed by farm --help
    from farm.run.sweep import SweepConfig, ray_init, sweep  # deferred: farm.run.sweep (ray+jax); not needed by farm --help
    from farm.store import open_store, queries  # deferred: farm.store (with sqlalchemy); not needed by farm --help

    figs: list[Figure] = []
    log("bench: sweeps on a local Ray cluster (1 worker, 2 workers, warm)")
    # Big enough that the actor start (~3 s, jax import) does not decide the scaling figure.
    families = ("elementwise_unary", "elementwise_binary", "comparison", "bitwise", "reduction", "cumulative")
    sweep_set = catalog.select(catalog.Filters(catalog="farm", family=families))
    if quick:
        sweep_set = sweep_set[:80]
    with tempfile.TemporaryDirectory() as d:
        started, _ = ray_init(None, 2)
        try:
            walls = {}
            for w in (1, 2):
                store = open_store(f"sqlite:///{d}/b{w}.db")
                _, st = sweep(store, sweep_set, options=Options(), catalog="farm", filters={},
                              config=SweepConfig(workers=w, progress=False), force=True, log=lambda s: None)
                walls[w] = st.wall_s
                if w == 2:
                    figs.append(Figure("peak RSS per worker", st.to_dict()["peak_rss_per_worker"] / 2**20, "MiB",
                                       2048.0))
                    t0 = time.perf_counter()
                    sweep(store, sweep_set, options=Options(), catalog="farm", filters={},
                          config=SweepConfig(workers=2, progress=False), log=lambda s: None)
                    warm = time.perf_counter() - t0
                    figs.append(Figure(f"warm re-sweep ({len(sweep_set)} harnesses, all cached)", warm, "s",
                                       10.0 * len(sweep_set) / 5594))
                    with store.session() as s:
                        rid = queries.resolve_run(s, "latest").id
                        q = timed(lambda: queries.primitive_matrix(s, rid), repeats=5)
                        figs.append(Figure("overview matrix query", 1000 * q[0], "ms", 300.0,
                                           spread=f"{1000 * q[1]:.1f}-{1000 * q[2]:.1f}"))
                        q = timed(lambda: queries.results(s, rid), repeats=3)
                        figs.append(Figure("run results query", 1000 * q[0], "ms", 300.0))
                store.dispose()
            figs.append(Figure(f"sweep wall, 1 worker ({len(sweep_set)} harnesses)", walls[1], "s"))
            figs.append(Figure(f"sweep wall, 2 workers ({len(sweep_set)} harnesses)", walls[2], "s"))
            figs.append(Figure("scaling 2 workers vs 1", walls[1] / walls[2], "x", 1.8, better="higher"))
        finally:
            if started:
                ray.shutdown()
    return figs


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def full_catalog_figures(log: Callable[[str], None], workers: int = 2) -> list[Figure]:
    """The real thing: a cold sweep of JAX's whole catalog (5,594 harnesses, every stage) by
    the CLI in a fresh process, then a warm re-sweep. The floor is the JAX work the sweep
    itself recorded (the sum of every stage's timer: trace, 4 lowerings, census walks,
    export, serialize, distinct compiles, executions, cross-exec) divided by the workers."""
    from sqlalchemy import func, select  # deferred: sqlalchemy; not needed by farm --help

    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help
    from farm.store.models import OutcomeRow, ResultRow, Run  # deferred: farm.store.models (over sqlalchemy); not needed by farm --help

    figs: list[Figure] = []
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/full.db"
        farm = [sys.executable, "-m", "farm", "sweep", "--catalog", "upstream", "--db", url,
                "--workers", str(workers)]
        # on a copy of jax on PYTHONPATH, so that one lowering rule can be edited for the last sweep
        lax_py = _jax_copy(Path(d) / "site")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(d) / "site"),
                                                                          os.environ.get("PYTHONPATH")]))}
        log("bench: cold sweep of the full upstream catalog (a few minutes)")
        b0, t0 = _cpu_times()
        w0 = time.perf_counter()
        subprocess.run(farm + ["--name", "cold"], check=True, capture_output=True, env=env)
        cold = time.perf_counter() - w0
        b1, t1 = _cpu_times()
        log("bench: warm re-sweep of the full upstream catalog")
        w0 = time.perf_counter()
        subprocess.run(farm + ["--name", "warm"], check=True, capture_output=True, env=env)
        warm = time.perf_counter() - w0
        log("bench: re-sweep after editing sin's lowering rule (sin lowered as cos)")
        _edit_sin_rule(lax_py)
        w0 = time.perf_counter()
        subprocess.run(farm + ["--name", "sin-edit"], check=True, capture_output=True, env=env)
        edited = time.perf_counter() - w0
        store = open_store(url)
        with store.session() as s:
            run = s.scalars(select(Run).where(Run.name == "cold")).one()
            work = s.scalar(select(func.sum(ResultRow.seconds)).where(ResultRow.run_id == run.id)) or 0.0
            n = s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run.id)) or 0
            compiles = s.execute(select(ResultRow.facts).where(ResultRow.run_id == run.id, ResultRow.stage == "compile",
                                                               ResultRow.status == "ok")).scalars().all()
            stats = dict(run.stats or {})
            verdicts = s.execute(select(ResultRow.status, ResultRow.facts, ResultRow.metrics).where(
                ResultRow.run_id == run.id, ResultRow.stage == "compare", ResultRow.platform == "cpu")).all()
        store.dispose()
        ref_s = sum(float((m or {}).get("reference_s", 0.0)) for _, _, m in verdicts)
        judged = sum(1 for st, f, _ in verdicts if st != "skipped" and (f or {}).get("against") in ("jaxpr", "invariant"))
        reused = sum(1 for f in compiles if (f or {}).get("reused"))
        floor = work / workers
        figs += [Figure(f"cold sweep, full upstream catalog ({n} harnesses), wall incl. Ray start", cold, "s", 300.0,
                        spread=f"{n / cold:.1f} harnesses/s"),
                 Figure(f"cold sweep / floor (Σ stage time {work:.0f} s / {workers} workers = {floor:.0f} s)",
                        cold / floor, "x", 1.5),
                 Figure("CPU utilisation during the cold sweep", 100.0 * (b1 - b0) / max(1, t1 - t0), "%"),
                 Figure("peak RSS per worker, full catalog", stats.get("peak_rss_per_worker", 0) / 2**20, "MiB",
                        2048.0),
                 Figure("compiles reused (same module), per worker", 100.0 * reused / max(1, len(compiles)), "%"),
                 Figure("warm re-sweep, full upstream catalog (all cached)", warm, "s", 10.0),
                 Figure("re-sweep after one lowering-rule edit (sin as cos), of the cold sweep", 100.0 * edited / cold,
                        "%", 25.0, spread=f"{edited:.1f} s"),
                 Figure("jaxpr reference: Σ evaluation time in the cold sweep (both workers)", ref_s, "s",
                        spread=f"{1000 * ref_s / max(1, judged):.2f} ms per judged harness"),
                 Figure("harnesses with an independent verdict (jaxpr reference or invariant)",
                        100.0 * judged / max(1, n), "%", 90.0, better="higher", spread=f"{judged} of {n}")]
    return figs


def api_catalog_figures(log: Callable[[str], None], workers: int = 2) -> list[Figure]:
    """A cold sweep of the api catalog (every jnp, jax.scipy, jax.nn and jax.random harness, edge
    variants included, every stage) by the CLI in a fresh process on a fresh database: the
    issue's goal is 10 minutes on this 2-core host. Its bad records are a figure too (goal 0)."""
    from sqlalchemy import func, select  # deferred: sqlalchemy; not needed by farm --help

    from farm.results import BAD  # deferred: as below
    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help
    from farm.store.models import OutcomeRow, ResultRow, Run  # deferred: farm.store.models (over sqlalchemy)

    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/api.db"
        log("bench: cold sweep of the api catalog (minutes)")
        w0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "farm", "sweep", "--catalog", "api", "--db", url, "--workers",
                        str(workers), "--name", "cold"], check=True, capture_output=True)
        cold = time.perf_counter() - w0
        store = open_store(url)
        with store.session() as s:
            run = s.scalars(select(Run).where(Run.name == "cold")).one()
            n = s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run.id)) or 0
            bad = s.scalar(select(func.count()).select_from(ResultRow).where(
                ResultRow.run_id == run.id, ResultRow.status.in_(tuple(BAD)))) or 0
        store.dispose()
    return [Figure(f"cold sweep, api catalog ({n} harnesses), wall incl. Ray start", cold, "s", 600.0,
                   spread=f"{n / cold:.1f} harnesses/s"),
            Figure("bad records (fail, error, crashed, timeout...) in the api catalog's cold sweep", bad, "", 0.0)]


def _jax_copy(site: Path) -> Path:
    """Copy the installed jax (without bytecode) under ``site``; returns its ``lax.py``."""
    import shutil

    import jax  # deferred: only the full-catalog figures copy it

    shutil.copytree(Path(jax.__file__).parent, site / "jax", ignore=shutil.ignore_patterns("__pycache__"))
    return site / "jax" / "_src" / "lax" / "lax.py"


def _edit_sin_rule(lax_py: Path) -> None:
    """Lower sin as cos in ``_sin_lowering`` (jax 0.10's rule; ConfigError if it is not there)."""
    text = lax_py.read_text()
    start = text.find("def _sin_lowering(")
    end = text.find("\ndef ", start + 1)
    body = text[start:end]
    if start < 0 or body.count("hlo.sine") != 1:
        raise ConfigError(f"no sin lowering rule to edit in {lax_py}")
    lax_py.write_text(text[:start] + body.replace("hlo.sine", "hlo.cosine") + text[end:])


def _sweep_excess(store: Any, hs: list[Any], n: int, opts: Any, workers: int, mods: tuple[str, ...],
                  log: Callable[[str], None]) -> float:
    """What the farm adds to one trivial sweep of ``hs[:n]``: wall minus worker time per worker.

    A module-level helper (not a closure) so ``overhead_figures`` stays short; checks that
    every outcome was stored, since a short sweep would make the slope meaningless."""
    from sqlalchemy import func, select  # deferred: sqlalchemy; not needed by farm --help

    from farm.run.sweep import SweepConfig, sweep  # deferred: farm.run.sweep (ray+jax); not needed by farm --help
    from farm.store.models import OutcomeRow  # deferred: farm.store.models (over sqlalchemy); not needed by farm --help

    t0 = time.perf_counter()
    run, st = sweep(store, hs[:n], options=opts, catalog="trivial", filters={},
                    config=SweepConfig(workers=workers, progress=False, modules=mods), force=True,
                    log=lambda s: None)
    wall = time.perf_counter() - t0
    with store.session() as s:
        work = s.scalar(select(func.sum(OutcomeRow.seconds)).where(OutcomeRow.run_id == run.id)) or 0.0
        done = s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run.id))
    if done != n:
        raise RuntimeError(f"trivial sweep stored {done} outcomes, expected {n}")
    log(f"bench:   {n} trivial harnesses: wall {wall:.2f} s, worker time {work:.2f} s")
    return wall - work / workers


def overhead_figures(quick: bool, log: Callable[[str], None], workers: int = 2) -> list[Figure]:
    """The farm's own cost per harness, through the full path (scheduler, Ray transfer,
    writer, store), on the trivial catalog (identity on a scalar, CPU only).

    For a sweep of n harnesses, ``excess(n) = wall − Σ worker-side seconds / workers``
    is what the farm adds. It also holds fixed costs (actor start and jax import, run
    creation), so the figure is the slope between two sizes, which cancels them:
    ``(excess(big) − excess(small)) / (big − small)``, from the medians of each size
    over several pairs (the spread is the pairs' own slopes). Ray's own start is outside
    every wall. On a loaded machine the actors' start varies by a second or more, which
    is why the sizes are far apart."""
    import ray  # deferred: ray; not needed by farm --help

    from farm import catalog  # deferred: farm.catalog; not needed by farm --help
    from farm.run.sweep import ray_init  # deferred: farm.run.sweep (ray+jax); not needed by farm --help
    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help

    mods = ("harnesses.trivial",)
    hs = catalog.select(catalog.Filters(catalog="trivial", modules=mods))
    small, big = 100, len(hs)
    pairs = 1 if quick else 3
    opts = Options(crossexec=False, platforms=("cpu",))
    log(f"bench: farm overhead: trivial sweeps of {small} and {big} harnesses on {workers} workers, "
        f"{pairs} pair(s)")
    excess_small: list[float] = []
    excess_big: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        started, _ = ray_init(None, workers)
        store = open_store(f"sqlite:///{d}/overhead.db")
        try:
            def excess(n: int) -> float:
                return _sweep_excess(store, hs, n, opts, workers, mods, log)

            excess(small)  # warm-up: the first actors of a fresh cluster start slower
            for _ in range(pairs):
                excess_small.append(excess(small))
                excess_big.append(excess(big))
        finally:
            store.dispose()
            if started:
                ray.shutdown()
    slope = (statistics.median(excess_big) - statistics.median(excess_small)) / (big - small)
    slopes = [(b - a) / (big - small) for a, b in zip(excess_small, excess_big)]
    return [Figure(f"farm overhead per harness (trivial catalog, {workers} workers, slope {small}->{big})",
                   1000 * slope, "ms", 2.0,
                   spread=f"pairs {1000 * min(slopes):.2f}-{1000 * max(slopes):.2f}, {pairs} pair(s)"),
            Figure(f"farm overhead per harness incl. fixed costs ({big} trivial harnesses)",
                   1000 * statistics.median(excess_big) / big, "ms",
                   spread="actor start + jax import spread over the sweep")]
