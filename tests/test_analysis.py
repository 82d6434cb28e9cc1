"""farm.analysis: pure functions over synthetic rows and series with known answers."""
from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from farm.analysis import detect_steps, failing, flaky, render_markdown, render_text, report, significant_steps
from farm.analysis.flips import classify
from farm.analysis.perf import METRICS, Settings, judge
from farm.analysis.stats import lookback_z, mad, mann_whitney_greater
from farm.analysis.steps import BETA, noise_sigma

DATA = Path(__file__).parent / "data"
EXECUTE = next(m for m in METRICS if m.name == "execute_s")
COMPILE = next(m for m in METRICS if m.name == "compile_s")
ARTIFACT = next(m for m in METRICS if m.name == "artifact_bytes")


# --------------------------------------------------------------------------- synthetic data
def noisy_repeats(rng: random.Random, level: float, cv: float = 0.08, outliers: float = 0.05) -> list[float]:
    """Three timed repeats: multiplicative noise plus occasional slow outliers (a busy machine)."""
    return sorted(level * math.exp(rng.gauss(0, cv)) * (rng.choice([1.5, 2.0, 3.0]) if rng.random() < outliers else 1)
                  for _ in range(3))


def history_series(rng: random.Random, n: int, level: float, step_at: int | None = None,
                   ratio: float = 1.0) -> list[list[float]]:
    return [noisy_repeats(rng, level * (ratio if step_at is not None and i >= step_at else 1.0)) for i in range(n)]


def run(i: int, env: str = "env-a", jax: str = "0.10.2") -> dict:
    return {"id": i, "name": f"run-{i}", "kind": "sweep", "status": "finished",
            "environment": {"fingerprint": env, "jax_version": jax, "jaxlib_version": jax, "python": "3.11",
                            "device_kinds": ["cpu"], "xla_flags": "", "host": "h", "farm_commit": "abc"}}


def row(harness: str, stage: str, status: str = "ok", platform: str = "cpu", metrics: dict | None = None,
        fp: str | None = None, seconds: float = 0.001, facts: dict | None = None, error: str | None = None) -> dict:
    prim = harness.split("_")[0]
    return {"harness": harness, "fingerprint": fp or f"fp-{harness}", "primitive": prim, "dtype": "float32",
            "platform": platform, "stage": stage, "status": status, "seconds": seconds, "metrics": metrics or {},
            "facts": facts or {}, "error": error, "error_type": None}


def harness_rows(harness: str, exec_reps=(2e-5, 3e-5, 4e-5), ulp: float = 0.5, compare: str = "ok",
                 mismatches: float = 0.0, **kw) -> list[dict]:
    lo, med, hi = exec_reps
    return [row(harness, "lower", seconds=0.007, **kw),
            row(harness, "compile", metrics={"compile_s": 0.05, "peak_memory_bytes": 96.0}, **kw),
            row(harness, "execute", metrics={"execute_s": med, "execute_min_s": lo, "execute_max_s": hi,
                                             "repeats": 3.0}, **kw),
            row(harness, "compare", compare, metrics={"max_abs_err": ulp * 1e-7, "max_rel_err": ulp * 1e-7,
                                                      "max_ulp_err": ulp, "mismatches": mismatches},
                facts={"rtol": 2e-5, "atol": 1e-6, "against": "reference"}, **kw),
            row(harness, "serialize", platform="export", metrics={"artifact_bytes": 1600.0},
                fp=kw.get("fp"))]


# --------------------------------------------------------------------------- statistics
def test_mann_whitney_exact_p_values():
    assert mann_whitney_greater([5, 6, 7], [1, 2, 3]) == (9.0, 0.05)
    assert mann_whitney_greater([1, 2, 3], [5, 6, 7])[1] == 1.0
    u, p = mann_whitney_greater([2, 4, 6], [1, 3, 5])
    assert u == 6 and 0.3 < p < 0.4


def test_mann_whitney_agrees_with_scipy():
    """The hand-written test is kept for speed (farm/analysis/stats.py): it must give
    SciPy's U and p, exact and tie-corrected alike."""
    from scipy import stats as ss
    rng = random.Random(1)
    cases = [([rng.random() for _ in range(3)], [rng.random() for _ in range(3)]) for _ in range(300)]
    cases += [([rng.randint(0, 3) for _ in range(7)], [rng.randint(0, 3) for _ in range(5)]) for _ in range(300)]
    cases += [([rng.random() for _ in range(30)], [rng.random() for _ in range(25)]) for _ in range(50)]
    for x, y in cases:
        u, p = mann_whitney_greater(x, y)
        want = ss.mannwhitneyu(x, y, alternative="greater", method="auto")
        assert u == want.statistic and p == pytest.approx(want.pvalue, abs=1e-12), (x, y)


def test_mad_is_scipys_normal_scaled_mad():
    from scipy import stats as ss
    xs = [random.Random(s).random() for s in range(25)]
    assert mad(xs) == pytest.approx(ss.median_abs_deviation(xs, scale="normal"), rel=1e-12)


def test_lookback_z_is_robust_to_one_outlier():
    hist = [1.0, 1.1, 0.9, 1.0, 5.0, 1.05, 0.95]
    assert abs(lookback_z(hist, 1.0)) < 1
    assert lookback_z(hist, 3.0) > 10
    assert lookback_z([1.0, 1.0], 2.0) is None


# --------------------------------------------------------------------------- step detection
def test_detect_steps_on_checked_in_series():
    d = json.loads((DATA / "execute_step.json").read_text())
    steps = significant_steps(detect_steps(d["series"], log=True), rel=0.2)
    assert [s.at for s in steps] == [d["step_at"]]
    assert steps[0].ratio == pytest.approx(d["ratio"], rel=0.1)


def test_detect_steps_is_ruptures_pelt_l1():
    """The hand-written segmentation is kept for speed (farm/analysis/steps.py): it must
    find ruptures' exact penalised L1 segmentation."""
    import ruptures as rpt
    for seed in range(40):
        rng = random.Random(seed)
        n = rng.randrange(5, 60)
        ys = [rng.gauss(0, 1) + (rng.choice([0, 3, -2]) if i > n // 3 else 0) for i in range(n)]
        sigma = noise_sigma(ys)
        gamma = BETA * sigma * math.log(n + 1)
        ends = [s.end for s in detect_steps(ys, sigma=sigma)]
        want = rpt.Pelt(model="l1", min_size=1, jump=1).fit(np.asarray(ys).reshape(-1, 1)).predict(pen=gamma)
        assert ends == want, (seed, ys)


def test_detect_steps_finds_planted_steps_and_ignores_noise():
    found = noise = 0
    for seed in range(100):
        rng = random.Random(seed)
        at = rng.randrange(8, 32)
        stepped = [r[1] for r in history_series(rng, 40, 0.01, at, 1.5)]
        flat = [r[1] for r in history_series(rng, 40, 0.01)]
        steps = significant_steps(detect_steps(stepped, log=True), rel=0.2)
        found += any(abs(s.at - at) <= 1 and s.ratio > 1.3 for s in steps)
        noise += bool(significant_steps(detect_steps(flat, log=True), rel=0.2))
    assert found >= 95
    assert noise <= 5


# --------------------------------------------------------------------------- performance verdicts
def _trial(rng: random.Random, ratio: float, n_hist: int, level: float = 0.01) -> str:
    hist = history_series(rng, n_hist + 1, level)
    base = hist[-1]
    cand = noisy_repeats(rng, level * ratio)
    return judge(EXECUTE, base, cand, [h[1] for h in hist], Settings())["verdict"]


@pytest.mark.parametrize("n_hist", [0, 12])
def test_perf_false_positive_rate_on_pure_noise(n_hist):
    """Over 1,000 seeds of pure noise (8% multiplicative, 5% slow outlier repeats), few
    candidates are called a regression. Measured: 1.4% with 12 runs of history (z >= 4),
    none without history (the repeats, which need a 2.5x change); the bound is 2.5%."""
    verdicts = [_trial(random.Random(seed), 1.0, n_hist) for seed in range(1000)]
    fp = verdicts.count("regression") / len(verdicts)
    assert fp <= 0.025, fp
    assert verdicts.count("improvement") / len(verdicts) <= 0.025


@pytest.mark.parametrize("n_hist,ratio,rate", [(12, 1.5, 0.93), (12, 2.0, 0.97), (0, 3.0, 0.8), (0, 5.0, 0.9)])
def test_perf_detects_planted_regressions(n_hist, ratio, rate):
    """Measured: with history 97% of 1.5x and 99% of 2x steps; with only the three repeats
    of each run 87% of 3x and 95% of 5x (an outlier repeat can overlap; a 2x change is
    not judged from one pair of runs, see ``farm.analysis.perf``)."""
    verdicts = [_trial(random.Random(seed), ratio, n_hist) for seed in range(300)]
    assert verdicts.count("regression") / len(verdicts) >= rate
    faster = [_trial(random.Random(seed), 1 / ratio, n_hist) for seed in range(300)]
    assert faster.count("improvement") / len(faster) >= rate - 0.05


def test_tiny_timings_are_judged_by_their_repeats():
    # 20 µs -> 60 µs: three times slower and clearly separated; no 1 ms floor any more
    v = judge(EXECUTE, [2e-5, 2.1e-5, 2.2e-5], [6e-5, 6.1e-5, 6.2e-5])
    assert v["verdict"] == "regression" and v["ratio"] == pytest.approx(2.9, rel=0.05)
    v = judge(EXECUTE, [2e-5, 2.1e-5, 2.2e-5], [0.05, 0.051, 0.052])
    assert v["verdict"] == "regression" and v["method"] == "mann-whitney" and v["p_value"] == 0.05


def test_one_timing_each_without_history_is_insufficient_data():
    assert judge(COMPILE, [0.05], [0.5])["verdict"] == "insufficient data"
    assert judge(COMPILE, [0.05], [0.051])["verdict"] == "noise"
    rng = random.Random(1)
    hist = [0.05 * math.exp(rng.gauss(0, 0.05)) for _ in range(10)]
    v = judge(COMPILE, [hist[-1]], [0.5], hist)
    assert v["verdict"] == "regression" and v["method"] == "history" and v["z"] > 4


def test_exact_sizes_report_any_change():
    assert judge(ARTIFACT, [1600.0], [4000.0])["verdict"] == "regression"
    assert judge(ARTIFACT, [1600.0], [1700.0])["verdict"] == "regression"  # 6%: past the 1% threshold
    assert judge(ARTIFACT, [1600.0], [1608.0])["verdict"] == "changed"
    assert judge(ARTIFACT, [1600.0], [1600.0])["verdict"] == "unchanged"


# --------------------------------------------------------------------------- status flips
@pytest.mark.parametrize("base,cand,kind", [
    ("ok", "fail", "new_failure"), ("ok", "error", "new_error"), ("fail", "crashed", "new_error"),
    ("fail", "ok", "fixed"), ("expected_fail", "unexpected_pass", "unexpected_pass"),
    ("ok", "skipped", "changed"), ("ok", "ok", None), ("ok", None, "missing"), (None, "ok", "new_result")])
def test_classify(base, cand, kind):
    assert classify(base, cand) == kind


def _pair(**cand_kw):
    base = [r for h in ("sin_f32", "exp_f32", "add_f32", "old_f32") for r in harness_rows(h)]
    base += [row("tanh_f32", "execute", "expected_fail"), row("log_f32", "compare", "fail")]
    cand = [r for h in ("exp_f32", "add_f32", "new_f32") for r in harness_rows(h)]
    cand += harness_rows("sin_f32", compare="fail", ulp=5e8, mismatches=12.0)
    cand += [row("tanh_f32", "execute", "unexpected_pass"), row("log_f32", "compare", "ok")]
    return base, cand


def test_report_names_flips_and_harness_changes():
    base, cand = _pair()
    rep = report(run(1), base, run(2, env="env-b", jax="0.10.3"), cand)
    json.dumps(rep, allow_nan=False)
    changes = {(f["harness"], f["change"]) for f in rep["findings"] if f["kind"] == "status"}
    assert changes == {("sin_f32", "new_failure"), ("tanh_f32", "unexpected_pass"), ("log_f32", "fixed")}
    assert rep["harnesses"]["added"] == ["new_f32"] and rep["harnesses"]["removed"] == ["old_f32"]
    assert rep["environment"]["same"] is False
    assert rep["environment"]["differences"]["jax_version"] == {"base": "0.10.2", "candidate": "0.10.3"}
    assert rep["regressions"] == {"status": ["sin_f32", "tanh_f32"], "numeric": ["sin_f32"], "perf": []}
    assert rep["findings"][0]["harness"] == "sin_f32"  # worst first
    assert [g["primitive"] for g in rep["primitives"]][0] == "sin"
    assert failing(rep, ["perf"]) == {}
    assert set(failing(rep)) == {"status", "numeric"}


def test_only_the_same_fingerprint_is_compared():
    base = harness_rows("sin_f32")
    cand = harness_rows("sin_f32", fp="fp-sin-v2", compare="fail", mismatches=3.0)
    rep = report(run(1), base, run(2), cand)
    assert rep["harnesses"]["redefined"] == ["sin_f32"] and rep["harnesses"]["compared"] == 0
    assert rep["findings"] == []


# --------------------------------------------------------------------------- numeric drift
def test_numeric_drift_inside_tolerance_and_beyond():
    base = harness_rows("sin_f32", ulp=0.5) + harness_rows("cos_f32", ulp=0.5) + harness_rows("exp_f32", ulp=0.5)
    cand = (harness_rows("sin_f32", ulp=6.0) + harness_rows("cos_f32", ulp=0.9)
            + harness_rows("exp_f32", ulp=300.0, compare="fail", mismatches=2.0))
    rep = report(run(1), base, run(2), cand)
    num = {f["harness"]: f for f in rep["findings"] if f["kind"] == "numeric"}
    assert set(num) == {"sin_f32", "exp_f32"}
    assert num["sin_f32"]["verdict"] == "grew" and num["sin_f32"]["regression"]
    assert num["sin_f32"]["metrics"]["max_ulp_err"]["ratio"] == 6.0
    assert num["exp_f32"]["verdict"] == "exceeds_tolerance"


# --------------------------------------------------------------------------- flaky
def test_flaky_needs_changes_back_and_forth_in_one_environment():
    seq = {"flip_f32": ["ok", "error", "ok", "ok", "error", "ok"], "step_f32": ["ok", "ok", "ok", "fail", "fail", "fail"]}
    runs = [(run(i + 1), [row(h, "execute", s[i]) for h, s in seq.items()]) for i in range(6)]
    f = flaky(runs)
    assert set(f) == {("fp-flip_f32", "cpu", "execute")}
    assert f[("fp-flip_f32", "cpu", "execute")]["rate"] == pytest.approx(1 / 3, abs=1e-3)
    # the same statuses in alternating environments are not flaky
    runs = [(run(i + 1, env=f"env-{i % 2}"), [row("flip_f32", "execute", s)])
            for i, s in enumerate(["ok", "error", "ok", "error"])]
    assert flaky(runs) == {}


def test_flips_on_flaky_results_are_not_regressions():
    statuses = ["ok", "error", "ok", "error", "ok", "error"]
    runs = [(run(i + 1), [row("flip_f32", "execute", s)]) for i, s in enumerate(statuses)]
    rep = report(runs[-2][0], runs[-2][1], runs[-1][0], runs[-1][1], runs[:-2])
    flip = next(f for f in rep["findings"] if f["kind"] == "status")
    assert flip["change"] == "new_error" and flip["flaky"]["rate"] == 0.5 and not flip["regression"]
    assert any(f["kind"] == "flaky" for f in rep["findings"])
    assert failing(rep, ["status", "numeric", "perf"]) == {}


# --------------------------------------------------------------------------- report over history
def test_report_over_noisy_history_flags_only_the_planted_regression():
    rng = random.Random(7)
    names = [f"h{i}_f32" for i in range(30)]
    runs = []
    for r in range(12):
        rows = []
        for j, h in enumerate(names):
            level = 0.004 * (1 + j % 5)
            if h == "h3_f32" and r == 11:
                level *= 2.5
            rows += harness_rows(h, exec_reps=tuple(noisy_repeats(rng, level)))
        runs.append((run(r + 1), rows))
    rep = report(runs[-2][0], runs[-2][1], runs[-1][0], runs[-1][1], runs[:-2])
    perf = [f for f in rep["findings"] if f["kind"] == "perf" and f["regression"]]
    assert [(f["harness"], f["metric"], f["method"]) for f in perf] == [("h3_f32", "execute_s", "history")]
    assert rep["regressions"]["perf"] == ["h3_f32"]
    assert rep["summary"]["perf"]["regression"] == 1


def test_renderings_mention_every_regression():
    base, cand = _pair()
    rep = report(run(1), base, run(2), cand)
    text, md = render_text(rep), render_markdown(rep)
    for name in ("sin_f32", "tanh_f32", "new_failure", "unexpected_pass"):
        assert name in text and name in md
    assert md.splitlines()[0].startswith("### compare run-1")


def test_analysis_imports_no_ray_store_or_web():
    code = ("import sys, farm.analysis; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('ray', 'sqlalchemy', 'flask') or m.startswith('farm.store')]; print(bad); sys.exit(bool(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
