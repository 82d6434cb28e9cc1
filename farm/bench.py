"""The benchmark suite behind ``farm bench``: each figure timed with warm-up and repeats,
and ratios measured in the same run against a baseline path so machine noise cancels.

Figures (goals from the benchmarks issue):
- catalog import + select (farm, upstream)                       goal < 2 s
- per-harness cost: farm pipeline vs a naive serial loop doing the same JAX work
- sweep throughput on Ray, 2 workers vs 1                        goal ≥ 1.8x
- warm re-sweep (nothing changed, result cache)                  goal ≤ 10 s full catalog
- farm overhead per harness (sweep wall − worker time / workers) goal ≤ 2 ms
- peak RSS per worker                                            goal ≤ 2 GB
- run-matrix and results queries                                 goal ≤ 300 ms
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    goal: float | None = None
    better: str = "lower"  # lower | higher
    spread: str = ""

    @property
    def ratio(self) -> float | None:
        if self.goal is None or not self.goal:
            return None
        return self.value / self.goal if self.better == "lower" else self.goal / self.value if self.value else None

    @property
    def met(self) -> bool | None:
        r = self.ratio
        return None if r is None else r <= 1.0


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
    import jax

    from farm.stages.trace import jitted

    t0 = time.perf_counter()
    for h in harnesses:
        args = h.make_args()
        with jax.enable_x64(h.needs_x64):
            jf, dyn = jitted(h, args)
            tr = jf.trace(*dyn)
            lows = [tr.lower(lowering_platforms=(p,)) for p in ("cpu", "cuda", "rocm", "tpu")]
            exp = jax.export.export(jf, platforms=("cpu", "cuda", "rocm", "tpu"))(*dyn)
            jax.export.deserialize(exp.serialize())
            out = lows[0].compile()(*dyn)
            jax.block_until_ready(out)
    return time.perf_counter() - t0


def _subprocess_seconds(code: str) -> float:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, capture_output=True,
                   env={**os.environ, "PYTHONPATH": root})
    return time.perf_counter() - t0


def run(quick: bool = True, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> list[Figure]:
    from farm import catalog
    from farm.pipeline import Options, run_harness

    figs: list[Figure] = []
    log("bench: catalog import + select")
    for cat in ("farm", "upstream"):
        secs = [_subprocess_seconds(f"from farm import catalog; catalog.select(catalog.Filters(catalog='{cat}', "
                                    f"dtype=('float32',)))") for _ in range(2 if quick else 3)]
        figs.append(Figure(f"catalog import+select ({cat}, fresh process)", statistics.median(secs), "s", 2.0,
                           spread=f"{min(secs):.2f}-{max(secs):.2f}"))

    n = 24 if quick else 120
    subset = catalog.select(catalog.Filters(catalog="farm", dtype=("float32", "int32")))[:n]
    log(f"bench: naive serial loop vs farm pipeline on {len(subset)} harnesses")
    from farm.pipeline import clear_caches

    def cold(fn: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: (clear_caches(), fn())

    naive = timed(cold(lambda: naive_loop(subset)), repeats=1 if quick else 3)
    farm_t = timed(cold(lambda: [run_harness(h, Options()) for h in subset]), repeats=1 if quick else 3)
    figs.append(Figure("naive loop, per harness", 1000 * naive[0] / len(subset), "ms"))
    figs.append(Figure("farm pipeline (all stages + census + crossexec), per harness",
                       1000 * farm_t[0] / len(subset), "ms", 1000 * 1.5 * naive[0] / len(subset),
                       spread="goal: ≤1.5x the naive loop's JAX work"))

    log("bench: sweeps on a local Ray cluster (1 worker, 2 workers, warm)")
    from farm.scheduler import SweepConfig, ray_init, sweep
    from farm.store import open_store

    import ray

    sweep_set = catalog.select(catalog.Filters(catalog="farm", family=("elementwise_unary", "elementwise_binary")))
    if quick:
        sweep_set = sweep_set[:80]
    with tempfile.TemporaryDirectory() as d:
        ray_init(None, 2)
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
                    with store.session() as s:
                        from sqlalchemy import func, select

                        from farm.store.models import OutcomeRow

                        work = s.scalar(select(func.sum(OutcomeRow.seconds))) or 0.0
                    overhead = max(0.0, st.wall_s - work / 2 - 3.0) / len(sweep_set)  # 3 s: two actors' jax import
                    figs.append(Figure("farm overhead per harness (wall - work/2 - startup)", 1000 * overhead, "ms",
                                       2.0))
                    t0 = time.perf_counter()
                    _, st2 = sweep(store, sweep_set, options=Options(), catalog="farm", filters={},
                                   config=SweepConfig(workers=2, progress=False), log=lambda s: None)
                    warm = time.perf_counter() - t0
                    figs.append(Figure(f"warm re-sweep ({len(sweep_set)} harnesses, all cached)", warm, "s",
                                       10.0 * len(sweep_set) / 5594))
                    from farm.store import queries

                    with store.session() as s:
                        rid = queries.resolve_run(s, "latest").id
                        q = timed(lambda: queries.primitive_matrix(s, rid), repeats=5)
                        figs.append(Figure("overview matrix query", 1000 * q[0], "ms", 300.0,
                                           spread=f"{1000 * q[1]:.1f}-{1000 * q[2]:.1f}"))
                        q = timed(lambda: queries.results(s, rid), repeats=3)
                        figs.append(Figure("run results query", 1000 * q[0], "ms", 300.0))
            figs.append(Figure(f"sweep wall, 1 worker ({len(sweep_set)} harnesses)", walls[1], "s"))
            figs.append(Figure(f"sweep wall, 2 workers ({len(sweep_set)} harnesses)", walls[2], "s"))
            figs.append(Figure("scaling 2 workers vs 1", walls[1] / walls[2], "x", 1.8, better="higher"))
        finally:
            ray.shutdown()
    return figs


def table(figs: list[Figure]) -> str:
    lines = [f"| figure | value | goal | ratio to goal | |", "|---|---|---|---|---|"]
    for f in figs:
        goal = "" if f.goal is None else f"{'≤' if f.better == 'lower' else '≥'} {f.goal:.3g} {f.unit}"
        ratio = "" if f.ratio is None else f"{f.ratio:.2f}"
        mark = "" if f.met is None else ("met" if f.met else "MISSED")
        lines.append(f"| {f.name} | {f.value:.3g} {f.unit} {('(' + f.spread + ')') if f.spread else ''} | {goal} | "
                     f"{ratio} | {mark} |")
    return "\n".join(lines)
