"""farm.analysis.perf on microsecond kernels and exact metrics: a slower small kernel is a
regression (the old 1 ms floor hid it), overlapping repeats are noise, and an exact metric
reports any change."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from farm.analysis import report
from farm.analysis.perf import METRIC_BY_STAGE, METRICS, Settings, compare_rows, judge, samples

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXECUTE = next(m for m in METRICS if m.name == "execute_s")
OLD_EXECUTE = dataclasses.replace(EXECUTE, min_abs=1e-3)  # the gate before: 1 ms at least
US = 1e-6


def row(stage: str, metrics: dict, facts: dict | None = None, platform: str = "cpu", harness: str = "exp_f32",
        status: str = "ok") -> dict:
    return {"harness": harness, "fingerprint": f"fp-{harness}", "primitive": harness.split("_")[0],
            "dtype": "float32", "platform": platform, "stage": stage, "status": status, "seconds": 0.001,
            "metrics": metrics, "facts": facts or {}, "error": None, "error_type": None}


def execute_row(times: list[float], **kw) -> dict:
    s = sorted(times)
    return row("execute", {"execute_s": s[len(s) // 2], "execute_min_s": s[0], "execute_max_s": s[-1],
                           "repeats": float(len(times))}, {"samples_s": list(times)}, **kw)


def verdict(base: list[float], cand: list[float]) -> dict:
    (v,) = compare_rows(execute_row(base), execute_row(cand))
    return v


# --------------------------------------------------------------------------- execute time
def test_planted_three_times_slower_small_kernel_is_a_regression():
    base, cand = [10.1 * US, 9.9 * US, 10.2 * US], [30.4 * US, 29.8 * US, 31.0 * US]
    v = verdict(base, cand)
    assert v["verdict"] == "regression" and v["method"] == "mann-whitney"
    assert v["ratio"] == pytest.approx(3.0, rel=0.02) and v["p_value"] == 0.05
    assert v["gap"] == pytest.approx(19.6 * US) and v["spread"] == pytest.approx(0.3 * US)
    # the old rule: the same repeats, but a change of 20 µs is under its 1 ms floor
    assert judge(OLD_EXECUTE, base, cand)["verdict"] == "noise"


def test_three_times_faster_small_kernel_is_an_improvement():
    assert verdict([30.4 * US, 29.8 * US, 31.0 * US], [10.1 * US, 9.9 * US, 10.2 * US])["verdict"] == "improvement"


def test_overlapping_repeats_are_noise():
    v = verdict([10.1 * US, 9.6 * US, 10.6 * US], [10.5 * US, 10.0 * US, 11.0 * US])
    assert v["verdict"] == "noise" and v["p_value"] > 0.05


@pytest.mark.parametrize("base,cand", [
    # clean pairs of runs measured on the farm's CPU host (µs): the repeats of each run agree
    # closely, the runs do not; no rule on the repeats alone can tell these from a regression
    ([45.1, 36.5, 32.9], [103.2, 87.6, 80.7]),  # dynamic_update_slice_float32_2x3x4_1x2x2
    ([43.3, 32.6, 23.9], [92.2, 68.2, 57.6]),  # sin_float32_3x4
    ([424.3, 437.6, 466.8], [1295.0, 1068.5, 915.2]),  # random_normal.normal_float32_4096
])
def test_two_clean_runs_apart_by_less_than_the_pair_ratio_are_noise(base, cand):
    v = verdict([t * US for t in base], [t * US for t in cand])
    assert v["verdict"] == "noise" and 2.0 < v["ratio"] < Settings().pair_ratio


def test_the_gap_must_exceed_the_base_runs_own_spread():
    # every candidate repeat is slower and the medians are 3x apart, but the base run's
    # own repeats spread wider than the gap between the runs
    v = verdict([5 * US, 10 * US, 25 * US], [27 * US, 30 * US, 33 * US])
    assert v["p_value"] == 0.05 and v["gap"] < v["spread"] and v["verdict"] == "noise"


def test_a_change_under_the_timer_floor_is_noise():
    v = verdict([0.10 * US, 0.10 * US, 0.11 * US], [0.60 * US, 0.61 * US, 0.62 * US])
    assert v["ratio"] > 5 and v["verdict"] == "noise"


def test_samples_come_from_the_record_else_from_min_median_max():
    r = execute_row([3 * US, 1 * US, 2 * US, 5 * US, 4 * US])
    assert samples(r, EXECUTE) == [3 * US, 1 * US, 2 * US, 5 * US, 4 * US]
    r["facts"] = {}
    assert samples(r, EXECUTE) == [1 * US, 3 * US, 5 * US]


def test_history_still_decides_when_there_is_enough():
    hist = [10 * US * (1 + 0.05 * ((i * 7) % 5 - 2)) for i in range(8)]
    rows = [(i, execute_row([h * 0.98, h, h * 1.02])) for i, h in enumerate(hist)]
    (v,) = compare_rows(rows[-1][1], execute_row([19 * US, 20 * US, 21 * US]), rows)
    assert v["method"] == "history" and v["verdict"] == "regression"


# --------------------------------------------------------------------------- exact metrics
def compile_row(harness: str = "exp_f32", **metrics: float) -> dict:
    return row("compile", {"compile_s": 0.05, "flops": 1000.0, "bytes_accessed": 96.0, "peak_memory_bytes": 96.0,
                           **metrics}, harness=harness)


def exact(base: dict, cand: dict) -> dict[str, str]:
    return {v["metric"]: v["verdict"] for v in compare_rows(base, cand) if v["metric"] != "compile_s"}


def test_flops_up_ten_percent_is_a_regression_down_an_improvement_unchanged_no_report():
    assert exact(compile_row(), compile_row(flops=1100.0)) == {"flops": "regression"}
    assert exact(compile_row(), compile_row(flops=900.0)) == {"flops": "improvement"}
    assert exact(compile_row(), compile_row()) == {}
    assert exact(compile_row(), compile_row(flops=1005.0)) == {"flops": "changed"}  # under 1%


def test_an_unknown_flop_count_is_insufficient_data():
    assert exact(compile_row(), compile_row(flops=-1.0)) == {"flops": "insufficient data"}


@pytest.mark.parametrize("stage,name", [("trace", "eqns"), ("lower", "module_bytes"), ("census", "ops"),
                                        ("serialize", "artifact_bytes"), ("compile", "temp_size_bytes")])
def test_every_exact_metric_is_judged(stage, name):
    assert name in {m.name for m in METRIC_BY_STAGE[stage] if not m.noisy}
    (v,) = [v for v in compare_rows(row(stage, {name: 200.0}), row(stage, {name: 203.0})) if v["metric"] == name]
    assert (v["metric"], v["verdict"], v["method"]) == (name, "regression", "deterministic")


def test_report_counts_changes_and_names_small_regressions():
    base = [execute_row([10.1 * US, 9.9 * US, 10.2 * US]), compile_row(),
            execute_row([10 * US, 10 * US, 10 * US], harness="add_f32"), compile_row("add_f32")]
    cand = [execute_row([30.4 * US, 29.8 * US, 31.0 * US]), compile_row(),
            execute_row([10 * US, 10 * US, 10 * US], harness="add_f32"), compile_row("add_f32", flops=1004.0)]
    rep = report({"id": 1, "name": "base", "environment": {}}, base, {"id": 2, "name": "cand", "environment": {}}, cand)
    assert rep["regressions"]["perf"] == ["exp_f32"]
    assert rep["summary"]["perf"]["regression"] == 1 and rep["summary"]["perf"]["changed"] == 1


# --------------------------------------------------------------------------- end to end
PLANTED = """
import json, sys
from farm import catalog
from farm import faults
from farm.pipeline import run_harness
from farm.results import Options
faults.plant_from_env()
(h,) = catalog.select(catalog.Filters.parse(primitive="exp", dtype="float32", name="exp_float32_3x4"))
o = run_harness(h, Options(platforms=("cpu",), crossexec=False, repeats=5))
print(json.dumps([r.to_dict() for r in o.records]))
"""


def _records(plant: str) -> list[dict]:
    env = {**os.environ, "FARM_PLANT": plant, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-c", PLANTED], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    recs = json.loads(p.stdout.strip().splitlines()[-1])
    return [{"harness": "exp_float32_3x4", "fingerprint": "fp-exp", "primitive": "exp", "dtype": "float32", **r}
            for r in recs]


def test_a_real_execute_slowed_by_a_host_callback_is_a_regression():
    """A clean run of exp_float32_3x4 (~10-40 µs here) and one where each call goes through
    a host callback that sleeps 50 ms (the ``slow`` planted fault), end to end through the real
    pipeline. The sleep is far above a base call's stall on a loaded host (a fresh clone on
    2026-12-03 saw a 5 ms plant called noise beside Bazel's 26 families: 6.5 ms against 40 µs
    medians, one base call stalled past the candidate's fastest): the rule asks the
    candidate's fastest repeat to clear the base's slowest by the base's spread, and one base call
    stalled by Bazel and two other test processes (CI, 2026-12-02: 20 µs planted, 9 µs against
    329 µs medians) made a 20 µs plant noise. That sub-millisecond slowdowns are regressions where
    the old 1 ms gate said noise is ``test_planted_three_times_slower_small_kernel_is_a_regression``'s,
    on samples."""
    base, cand = _records(""), _records("slow:exp:0.05")
    (b,) = [r for r in base if r["stage"] == "execute"]
    (c,) = [r for r in cand if r["stage"] == "execute"]
    # 5 repeats, not the default 3: with 3 a side, one base call stalled by the other test
    # worker (CI runs 2) leaves the exact test at p = 0.1, which is noise (seen once: 37 against 312 us)
    assert len(c["facts"]["samples_s"]) == 5 and c["facts"]["warmup_calls"] >= 1
    (v,) = compare_rows(b, c)
    assert v["verdict"] == "regression" and v["method"] == "mann-whitney", v
    rep = report({"id": 1, "name": "clean", "environment": {}}, base,
                 {"id": 2, "name": "slow", "environment": {}}, cand)
    assert rep["regressions"]["perf"] == ["exp_float32_3x4"]
    found = {(f["stage"], f["metric"]) for f in rep["findings"] if f["kind"] == "perf" and f["regression"]}
    # the host callback also shows in the module: bigger, more ops
    assert {("execute", "execute_s"), ("lower", "module_bytes"), ("census", "ops")} <= found
