"""Benchmarks of the hot functions (pytest-benchmark), each also checking its answer:
catalog selection, the census walk, compare_outputs, a store write batch, the analysis
report on a long history, and the dashboard's run queries. Plus the benchmark
database generator (``farm.bench.db``).

Sizes are kept small enough for the whole file to take well under 30 s in the normal
suite; ``pytest tests/test_bench_suite.py --benchmark-only`` prints the timing table.
"""
from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select

from farm.errors import ConfigError
from farm.results import Artifact, Outcome
from farm.results import Record
from farm.store import open_store, queries, writes
from farm.store.models import OutcomeRow, ResultRow, Run

ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "bench",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
PRIMITIVES = ("sin", "cos", "add", "mul", "dot_general", "reduce_sum", "sort", "cumsum")
DTYPES = ("float32", "float16", "int32", "bfloat16")
N_HARNESSES = 400
#: Records per synthetic outcome: trace, lower and census x 4 platforms, export, serialize,
#: compile, execute, compare, crossexec x 3.
RECORDS = 17


# --------------------------------------------------------------------------- synthetic data
def harness_desc(i: int) -> dict[str, Any]:
    prim, dt = PRIMITIVES[i % len(PRIMITIVES)], DTYPES[(i // len(PRIMITIVES)) % len(DTYPES)]
    return {"fingerprint": f"fp{i:05d}", "name": f"{prim}_{dt}_{i}", "catalog": "farm", "family": "fam",
            "primitive": prim, "group": prim, "dtype": dt, "shapes": [[8]], "params": {}}


def outcome(i: int, rng: random.Random, broken: bool = False) -> Outcome:
    """One harness through every stage a sweep records: RECORDS records, 2 artifacts."""
    module = f"module @h{i % 50} {{}}".encode()  # modules repeat across harnesses, like real ones
    msha = hashlib.sha256(module).hexdigest()
    io = f"io {i}".encode()
    iosha = hashlib.sha256(io).hexdigest()
    t = lambda base: base * math.exp(rng.gauss(0, 0.05))  # noqa: E731
    recs = [Record("trace", "any", "ok", t(0.002))]
    for p in PLATFORMS:
        recs += [Record("lower", p, "ok", t(0.004), metrics={"module_bytes": 310.0}, facts={"module_sha256": msha}),
                 Record("census", p, "ok", t(0.0005), metrics={"ops": 3.0},
                        facts={"dialects": ["func", "stablehlo"], "non_stablehlo": [], "custom_calls": []})]
    recs += [Record("export", "export", "ok", t(0.01)),
             Record("serialize", "export", "ok", t(0.001), metrics={"artifact_bytes": 1600.0}),
             Record("compile", "cpu", "ok", t(0.03), metrics={"compile_s": t(0.03)}),
             Record("execute", "cpu", "fail" if broken else "ok", t(0.001), artifact=iosha,
                    metrics={"execute_s": t(2e-5), "execute_min_s": 1.8e-5, "execute_max_s": 3e-5, "repeats": 3.0}),
             Record("compare", "cpu", "ok", 0.0, metrics={"max_abs_err": 0.0, "max_ulp_err": 0.5},
                    facts={"rtol": 2e-5, "atol": 1e-6, "against": "reference"})]
    recs += [Record("crossexec", p, "ok", t(0.002)) for p in PLATFORMS[1:]]
    return Outcome(f"fp{i:05d}", harness_desc(i)["name"], recs,
                   [Artifact(msha, "module", module, {"jax_version": "0.10.2"}),
                    Artifact(iosha, "io", io, {"jax_version": "0.10.2"})], seconds=t(0.06))


def sweep_into(store: Any, name: str, n: int, seed: int, broken: frozenset[int] = frozenset()) -> int:
    """A finished run of ``n`` synthetic harnesses, written the way a sweep writes."""
    rng = random.Random(seed)
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name=name, platforms=PLATFORMS, run_on=["cpu"], total=n)
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(n)])
        w = writes.Writer(s, run, hids)
        for j in range(0, n, 100):
            w.write([outcome(i, rng, i in broken) for i in range(j, min(n, j + 100))], "bench")
        writes.finish_run(s, run, "finished")
        return run.id


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A SQLite file with two runs of N_HARNESSES synthetic harnesses; harness 7 breaks in the second."""
    url = f"sqlite:///{tmp_path_factory.mktemp('bench') / 'farm.db'}"
    store = open_store(url)
    base = sweep_into(store, "base", N_HARNESSES, seed=1)
    head = sweep_into(store, "head", N_HARNESSES, seed=2, broken=frozenset({7}))
    return {"url": url, "store": store, "base": base, "head": head}


# --------------------------------------------------------------------------- catalog
def test_catalog_selection(benchmark: Any) -> None:
    from farm import catalog

    everything = catalog.load("farm")  # imports the families once, outside the timing
    filters = catalog.Filters.parse(catalog="farm", dtype="float32,int32", name="*sin*,add")
    got = benchmark.pedantic(catalog.select, args=(filters,), rounds=5, warmup_rounds=1)
    want = [h for h in everything if h.dtype in ("float32", "int32") and ("sin" in h.name or "add" in h.name)]
    assert got and [h.fingerprint for h in got] == [h.fingerprint for h in want]


# --------------------------------------------------------------------------- census
def test_census_walk(benchmark: Any) -> None:
    import jax
    import jax.numpy as jnp

    from farm.stages import census

    def f(x):
        for _ in range(60):
            x = jnp.sin(x) * 2.0 + jnp.cos(x)
        return x.sum()

    text = jax.jit(f).lower(np.ones((16,), np.float32)).as_text()
    module = census.parse(text)
    facts = benchmark.pedantic(census.walk, args=(module,), rounds=5, warmup_rounds=1)
    assert facts["non_stablehlo"] == [] and facts["unguaranteed"] == []
    assert {"func", "stablehlo"} <= set(facts["dialects"])
    assert facts["ops"] >= 60 * 4  # sine, multiply, cosine, add per step (constants and the reduce on top)


# --------------------------------------------------------------------------- compare
def test_compare_outputs(benchmark: Any) -> None:
    from farm.judge.outputs import compare_outputs

    rng = np.random.default_rng(0)
    expected = [rng.standard_normal(1_000_000).astype(np.float32), rng.standard_normal((300, 300)).astype(np.float32)]
    actual = [e + np.float32(1e-7) * np.sign(e) for e in expected]
    status, err, m = benchmark.pedantic(compare_outputs, args=(actual, expected, 2e-5, 1e-6, False), rounds=3,
                                        warmup_rounds=1)
    assert (status, err, m["mismatches"]) == ("ok", None, 0.0)
    assert 0 < m["max_abs_err"] < 2e-7
    bad = [a.copy() for a in actual]
    bad[0][12345] += 1.0
    status, err, m = compare_outputs(bad, expected, 2e-5, 1e-6, False)
    assert status == "fail" and m["mismatches"] == 1.0 and "1 elements differ" in err


# --------------------------------------------------------------------------- store writes
def test_store_write_batch(benchmark: Any, sqlite_url: str) -> None:
    """One writer batch of 200 outcomes (3,400 results) into a fresh run, committed."""
    store = open_store(sqlite_url)
    rng = random.Random(0)
    batch = [outcome(i, rng) for i in range(200)]
    with store.session() as s:
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(200)])
    runs: list[int] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        s = store.sessions()
        run = writes.create_run(s, env=ENV, platforms=PLATFORMS, run_on=["cpu"], total=200)
        s.commit()
        runs.append(run.id)
        return (s, run), {}

    def write(s: Any, run: Run) -> None:
        writes.Writer(s, run, hids).write(batch, "bench")
        s.commit()
        s.close()

    benchmark.pedantic(write, setup=setup, rounds=3)
    with store.session() as s:
        for rid in runs:
            assert s.scalar(select(func.count()).select_from(ResultRow).where(ResultRow.run_id == rid)) == 200 * RECORDS
            assert s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == rid)) == 200
    store.dispose()


# --------------------------------------------------------------------------- analysis
def _history_rows(n: int, runs: int, slow: int, broken: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """``runs`` runs of ``n`` harnesses (lower, compile, execute, compare, serialize); in the
    last run harness ``slow`` executes 3x slower and harness ``broken`` fails to compare."""
    rng = random.Random(0)
    env = {"fingerprint": "env", **ENV}
    out = []
    for r in range(1, runs + 1):
        last = r == runs
        rows = []
        for i in range(n):
            d = harness_desc(i)
            base = {"harness": d["name"], "fingerprint": d["fingerprint"], "primitive": d["primitive"],
                    "dtype": d["dtype"], "error": None, "error_type": None, "facts": {}}
            level = 1e-3 * (3.0 if last and i == slow else 1.0)
            reps = sorted(level * math.exp(rng.gauss(0, 0.03)) for _ in range(3))
            rows += [{**base, "platform": "cpu", "stage": "lower", "status": "ok", "seconds": 0.005, "metrics": {}},
                     {**base, "platform": "cpu", "stage": "compile", "status": "ok", "seconds": 0.03,
                      "metrics": {"compile_s": 0.03 * math.exp(rng.gauss(0, 0.03)), "peak_memory_bytes": 96.0}},
                     {**base, "platform": "cpu", "stage": "execute", "status": "ok", "seconds": 0.002,
                      "metrics": {"execute_s": reps[1], "execute_min_s": reps[0], "execute_max_s": reps[2],
                                  "repeats": 3.0}},
                     {**base, "platform": "cpu", "stage": "compare",
                      "status": "fail" if last and i == broken else "ok", "seconds": 0.0,
                      "metrics": {"max_abs_err": 1e-7, "max_rel_err": 1e-7, "max_ulp_err": 0.5,
                                  "mismatches": 3.0 if last and i == broken else 0.0},
                      "facts": {"rtol": 2e-5, "atol": 1e-6, "against": "reference"}},
                     {**base, "platform": "export", "stage": "serialize", "status": "ok", "seconds": 0.001,
                      "metrics": {"artifact_bytes": 1600.0}}]
        out.append(({"id": r, "name": f"run-{r}", "kind": "sweep", "status": "finished", "environment": env}, rows))
    return out


def test_analysis_report_on_long_history(benchmark: Any) -> None:
    from farm.analysis import report

    hist = _history_rows(n=1000, runs=8, slow=11, broken=23)
    (base, brows), (cand, crows) = hist[-2], hist[-1]
    rep = benchmark.pedantic(report, args=(base, brows, cand, crows, hist), rounds=3)
    assert rep["summary"]["results_compared"] == 1000 * 5
    assert rep["harnesses"]["compared"] == 1000
    slow, broken = harness_desc(11)["name"], harness_desc(23)["name"]
    assert rep["regressions"]["perf"] == [slow]
    assert rep["regressions"]["status"] == [broken]


# --------------------------------------------------------------------------- dashboard queries
def test_overview_queries(benchmark: Any, two_runs: dict[str, Any]) -> None:
    """The overview's matrix and filter choices for a run."""
    store, head = two_runs["store"], two_runs["head"]

    def overview() -> tuple[dict[str, Any], dict[str, list[str]]]:
        with store.session() as s:
            return queries.filtered_matrix(s, head), queries.filter_values(s, head)

    m, choices = benchmark.pedantic(overview, rounds=5, warmup_rounds=1)
    assert sorted(m) == sorted(PRIMITIVES)
    assert sum(sum(c["counts"].values()) for cells in m.values() for c in cells.values()) == N_HARNESSES * RECORDS
    broken = harness_desc(7)["primitive"]  # harness 7 breaks in the head run; 5 cpu records per harness
    assert m[broken]["cpu"]["worst"] == "fail" and m[broken]["cpu"]["counts"] == {"ok": 5 * N_HARNESSES // 8 - 1,
                                                                                  "fail": 1}
    assert all(c["worst"] == "ok" for p, cells in m.items() for c in cells.values() if p != broken)
    assert choices["platform"] == sorted(PLATFORMS + ("any", "export"))
    assert choices["status"] == ["fail", "ok"]


def test_run_results_query(benchmark: Any, two_runs: dict[str, Any]) -> None:
    """All result rows of a run, as the compare page and ``farm compare`` load them."""
    store, head = two_runs["store"], two_runs["head"]

    def load() -> list[dict[str, Any]]:
        with store.session() as s:
            return queries.results(s, head)

    rows = benchmark.pedantic(load, rounds=5, warmup_rounds=1)
    assert len(rows) == N_HARNESSES * RECORDS
    assert [r["harness"] for r in rows] == sorted(r["harness"] for r in rows)
    assert Counter(r["status"] for r in rows) == {"ok": N_HARNESSES * RECORDS - 1, "fail": 1}
    lower = next(r for r in rows if r["stage"] == "lower")
    assert set(lower) >= {"harness", "fingerprint", "platform", "stage", "status", "metrics", "facts", "artifact"}
    assert lower["facts"]["module_sha256"] and lower["metrics"] == {"module_bytes": 310.0}
    lower["metrics"]["module_bytes"] = -1.0  # rows share decoded JSON text, never the dicts
    assert all(r["metrics"]["module_bytes"] == 310.0 for r in rows if r["stage"] == "lower" and r is not lower)


# --------------------------------------------------------------------------- benchmark database
def test_benchdb_replicates_a_run(two_runs: dict[str, Any], tmp_path: Any) -> None:
    from farm.bench.db import make_db

    dst = f"sqlite:///{tmp_path / 'bench.db'}"
    info = make_db(two_runs["url"], dst, runs=4, src_run="head", seed=3, step_fraction=0.05,
                   flip_fraction=0.2, log=lambda s: None)
    assert info["source"] == "head" and len(info["runs"]) == 4
    assert info["results"] == 4 * N_HARNESSES * RECORDS and info["outcomes"] == 4 * N_HARNESSES
    store = open_store(dst)
    with store.session() as s:
        runs = [queries.resolve_run(s, i) for i in info["runs"]]
        assert [r.name for r in runs] == [f"head-r{i:02d}" for i in range(1, 5)]
        assert all(r.status == "finished" for r in runs)
        assert runs[0].started_at < runs[-1].started_at
        first, last = queries.results(s, runs[0].id), queries.results(s, runs[-1].id)
        # same results, statuses kept except the planted flips in the last run only
        assert [(r["fingerprint"], r["platform"], r["stage"]) for r in first] == \
               [(r["fingerprint"], r["platform"], r["stage"]) for r in last]
        assert sum(r["status"] == "fail" for r in first) == 1
        flips = [b for a, b in zip(first, last) if a["status"] != b["status"]]
        assert flips and all(f["stage"] == "execute" and f["status"] == "fail" for f in flips)
        # timings vary, within noise and the 1.5x step
        ratios = [b["seconds"] / a["seconds"] for a, b in zip(first, last) if a["seconds"]]
        assert len(set(ratios)) > 100 and all(0.5 < x < 2.5 for x in ratios)
        assert s.scalar(select(func.count()).select_from(Run)) == 4
    store.dispose()
    with pytest.raises(ConfigError, match="already has run"):
        make_db(two_runs["url"], dst, runs=4, src_run="head", log=lambda s: None)
    with pytest.raises(ConfigError, match="does not exist"):
        make_db(f"sqlite:///{tmp_path / 'missing.db'}", dst, log=lambda s: None)
    assert not (tmp_path / "missing.db").exists()
    # the same seed makes the same database
    again = f"sqlite:///{tmp_path / 'again.db'}"
    make_db(two_runs["url"], again, runs=4, src_run="head", seed=3, step_fraction=0.05, flip_fraction=0.2,
            log=lambda s: None)
    a, b = open_store(dst), open_store(again)
    with a.session() as sa, b.session() as sb:
        q = select(ResultRow.seconds, ResultRow.status).order_by(ResultRow.id)
        assert sa.execute(q).all() == sb.execute(q).all()
    a.dispose()
    b.dispose()


@pytest.mark.slow
def test_fleet_replays_a_run_through_the_real_driver_and_an_unchanged_replay_stores_nothing(ray_local, tmp_path) -> None:  # noqa: ANN001
    """``farm bench --only fleet``'s path (replay actors, the real scheduler and writer): every
    harness arrives once, and the same run replayed again becomes a delta run that stores no row
    and next to no bytes (payload), while the fleet's own figures are computed from it."""
    import sqlite3

    from farm.bench.fleet import drive, synthetic
    from farm.bench.fleet_figures import _sqlite_bytes

    rec = synthetic(60, seed=3)
    path = tmp_path / "fleet.db"
    store = open_store(f"sqlite:///{path}")
    before = _sqlite_bytes(path)
    first = drive(store, rec, name="first", workers=3, rate=200.0, batch=7)
    full = _sqlite_bytes(path)
    again = drive(store, rec, name="again", workers=3, rate=200.0, batch=7)
    after = _sqlite_bytes(path)
    store.dispose()
    assert first["harnesses"] == again["harnesses"] == 60
    assert first["rows"] == sum(len(o["records"]) for o in rec.outcomes)
    assert first["delta"] == {"base": None, "harnesses": 60, "stored": 60}
    assert again["delta"]["base"] is not None and again["delta"]["stored"] == 0
    assert (after[1] - full[1]) < 0.01 * (full[1] - before[1])
    with sqlite3.connect(path) as c:  # the delta run still reads as every harness's rows
        n = c.execute("SELECT count(*) FROM results r JOIN runs ON runs.id = r.run_id WHERE runs.name = 'again'").fetchone()
    assert n[0] == first["rows"]


@pytest.mark.slow
def test_storage_figures_follow_unchanged_nightlies_then_prune_and_vacuum(ray_local) -> None:  # noqa: ANN001
    """``farm bench --only storage``'s path on 3 harnesses and 3 unchanged re-sweeps: the runs
    are real sweeps (the fresh one, the first re-sweep stored in full, two delta runs on it);
    prune keeps the newest 2 and their base, so deletes the fresh run; the file does not
    shrink until VACUUM gives the freed pages back."""
    from farm.bench import storage_figures as sf

    logged: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sf, "KEEP", 2)
        figs = {f.name.split(" (")[0].split(" vs ")[0]: f for f in sf.storage_figures(True, logged.append, nightlies=3,
                                                                                          harnesses=3)}
    nightly = [line for line in logged if line.startswith("bench: storage: nightly ")]
    assert len(nightly) == 4  # the fresh sweep and 3 re-sweeps
    after = figs["SQLite file after 3 unchanged nightlies"].value
    assert after > 1.0  # the re-sweeps' runs (and the first one's full rows) take room
    pruned = next(f for name, f in figs.items() if name.startswith("SQLite file after farm db prune --keep 2"))
    assert "(1 runs deleted)" in pruned.name
    assert figs["SQLite file after VACUUM"].value < pruned.value == after


def test_symbolic_variant_of_one_harness(benchmark: Any) -> None:
    """The symbolic variant's whole path for one harness (widen, four-platform export,
    serialize, per-platform exports, calls at three points, judged): the unit the 1.6x goal
    of `farm bench --only symbolic` is made of."""
    from farm import catalog
    from farm.pipeline.symbolic import run_symbolic

    h = catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))[0]
    recs = benchmark.pedantic(run_symbolic, args=(h,), rounds=2, iterations=1)
    assert {r.platform: r.status for r in recs if r.stage == "symbolic_call"} == dict.fromkeys(PLATFORMS, "ok")


@pytest.mark.slow(reason="two cold sweeps side by side, as the bench figure makes them")
def test_symbolic_figures_compare_two_cold_sweeps_side_by_side() -> None:
    """`farm bench --only symbolic` on a tiny slice: both sweeps run, the ratio is theirs."""
    from farm.bench.symbolic_figures import symbolic_figures

    figs = symbolic_figures(True, lambda s: None, workers=1, catalog="farm", limit=3)
    static, both, ratio = figs
    assert static.value > 0 and both.value > 0 and ratio.goal == 1.6
    assert math.isclose(ratio.value, both.value / static.value)


def test_a_checks_figure_sweeps_without_and_with_its_option_alternating(monkeypatch) -> None:  # noqa: ANN001
    """`farm bench --only compositions` (and gradients, determinism): the plain sweep and the
    one with the check's option alternate, and the ratio is theirs under the check's goal."""
    from farm.bench import check_figures as cf

    calls: list[tuple[str, ...]] = []
    times = iter([10.0, 13.0, 20.0, 25.0])
    monkeypatch.setattr(cf, "_sweep", lambda url, extra, workers, select: calls.append(tuple(extra)) or next(times))
    plain, on, ratio = cf.check_figures("compositions", False, lambda s: None)
    assert calls == [(), ("--compositions",), (), ("--compositions",)]
    assert (plain.value, on.value) == (15.0, 19.0) and ratio.goal == 1.3
    assert math.isclose(ratio.value, 19.0 / 15.0)
    assert cf.CHECKS["gradients"] == (("--vjp", "1"), 1.5)
