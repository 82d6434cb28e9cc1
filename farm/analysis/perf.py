"""Performance verdicts for one metric of one result: regression, improvement, changed,
noise or insufficient data, with the numbers behind them.

Exact metrics: the same module on the same compiler gives the same number, so any change
is real. They are the jaxpr's equations (trace ``eqns``), the module's size (lower
``module_bytes``), its op count (census ``ops``), the serialized artifact's size
(serialize ``artifact_bytes``) and XLA's cost and memory analysis (compile ``flops``,
``transcendentals``, ``bytes_accessed``, ``argument_size_bytes``, ``output_size_bytes``,
``temp_size_bytes``, ``generated_code_size_bytes``, ``peak_memory_bytes``). Equal values
are ``unchanged`` (``compare_rows`` leaves them out); an increase of at least
``exact_threshold`` (1%) is a regression, a decrease of at least that an improvement, a
smaller change ``changed``. A negative value is XLA's "unknown" (flops of a module with a
host callback): ``insufficient data``.

Timings (``execute_s``, ``compile_s``, ``lower_s``) are noisy. A change must pass a gate
first: a relative change of at least ``threshold`` AND an absolute change of at least the
metric's ``min_abs`` (for execute time 1 µs, about ten steps of ``time.perf_counter``,
0.11-0.14 µs on our hosts: a floor for the timer, not for the kernel). Then the evidence:

- with a history of at least ``min_history`` runs: the series up to the base is fitted
  with ``detect_steps``; the candidate is judged against the base's level with a robust
  z-score of the noise in that level (log scale), like a lookback z-score. This is the
  method that sees the noise between runs, and the only one that can call a 20% change;
- otherwise with repeats on both sides (execute: every repeat's time, the record's
  ``samples_s`` fact; older records: min, median and max): method ``mann-whitney``, all of
    1. the one-sided exact Mann-Whitney test on the repeats gives p <= ``alpha`` (with three
       repeats each: every candidate repeat is beyond every base repeat);
    2. the gap between the nearest repeats of the two runs (min(candidate) - max(base)
       when slower) is at least the base run's own spread (max - min) and ``min_abs``;
    3. the ratio of the medians is at least ``pair_ratio`` (2.5), or at most its inverse.
  Rule 3 stands for the noise between runs, which repeats run back to back cannot see.
  Measured on the float32 farm catalog (184 kernels, 10-800 µs on CPU, a shared 2-vCPU
  host): between two clean runs the median execute time moved by more than 2x for 10% of
  the kernels and more than 3x for about 1%, while each run's repeats agreed closely.
  Rules 1 and 2 alone called 1.4% of clean kernels a regression (2.4% with another sweep
  running, 16% on a loaded host); with rule 3 it is 0.6% (1.4%, 3.9%), and a kernel made
  3x slower is caught about half the time, 5x slower 85%. More repeats do not help (5 or
  10 repeats measured the same); history does;
- otherwise (one timing each): ``insufficient data``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from farm.analysis.rows import Row, finite, metric, number
from farm.analysis.stats import mad, mann_whitney_greater, median
from farm.analysis.steps import detect_steps, noise_sigma, significant_steps

#: What ``compare_rows`` can say (``judge`` also says ``unchanged`` of an exact metric).
VERDICTS = ("regression", "improvement", "changed", "noise", "insufficient data")


@dataclass(frozen=True, slots=True)
class PerfMetric:
    """Where a performance number lives in a result row, and how noisy it is."""

    name: str  # the name reports use
    stage: str  # the row's stage
    field: str  # metrics key, or "seconds" for the row's wall time
    unit: str  # "s", "bytes" or "count"
    min_abs: float = 0.0  # smallest absolute change that can count (timings)
    noisy: bool = True  # False: exact, judged by any change
    samples_fact: str | None = None  # facts key of every repeat's value, if any
    min_field: str | None = None  # metrics keys of the repeats' spread (older records)
    max_field: str | None = None


def _exact(name: str, stage: str, unit: str = "bytes") -> PerfMetric:
    return PerfMetric(name, stage, name, unit, noisy=False)


METRICS = (
    PerfMetric("execute_s", "execute", "execute_s", "s", 1e-6, samples_fact="samples_s",
               min_field="execute_min_s", max_field="execute_max_s"),
    PerfMetric("compile_s", "compile", "compile_s", "s", 0.02),
    PerfMetric("lower_s", "lower", "seconds", "s", 0.01),
    _exact("eqns", "trace", "count"),
    _exact("module_bytes", "lower"),
    _exact("ops", "census", "count"),
    _exact("artifact_bytes", "serialize"),
    _exact("flops", "compile", "count"),
    _exact("transcendentals", "compile", "count"),
    _exact("bytes_accessed", "compile"),
    _exact("argument_size_bytes", "compile"),
    _exact("output_size_bytes", "compile"),
    _exact("temp_size_bytes", "compile"),
    _exact("generated_code_size_bytes", "compile"),
    _exact("peak_memory_bytes", "compile"),
)
METRIC_BY_STAGE: dict[str, list[PerfMetric]] = {}
for _m in METRICS:
    METRIC_BY_STAGE.setdefault(_m.stage, []).append(_m)


@dataclass(frozen=True, slots=True)
class Settings:
    threshold: float = 0.2  # relative change of a timing that counts
    alpha: float = 0.05  # Mann-Whitney significance
    z: float = 4.0  # lookback z-score that counts
    min_history: int = 5  # runs up to the base needed for the history method
    pair_ratio: float = 2.5  # ratio a timing needs when judged from two runs' repeats alone
    exact_threshold: float = 0.01  # relative change of an exact metric that is a regression


def samples(row: Row | None, m: PerfMetric) -> list[float]:
    """The repeats a run kept for ``m``: every repeat when the record has them, else
    [min, median, max] (or [min, max]) from its metrics, else [value]."""
    v = metric(row, m.field)
    if v is None:
        return []
    if m.samples_fact:
        raw = ((row or {}).get("facts") or {}).get(m.samples_fact)
        xs = [x for x in map(number, raw) if x is not None] if isinstance(raw, list) else []
        if xs:
            return xs
    if m.min_field and m.max_field:
        lo, hi = metric(row, m.min_field), metric(row, m.max_field)
        reps = metric(row, "repeats") or 0
        if lo is not None and hi is not None and reps >= 2:
            return [lo, v, hi] if reps >= 3 else [lo, hi]
    return [v]


def _gate(ref: float, value: float, m: PerfMetric, s: Settings) -> tuple[bool, float, float]:
    change = value - ref
    rel = change / ref if ref else (math.inf if change else 0.0)
    return abs(change) >= m.min_abs and abs(rel) >= s.threshold, change, rel


def _judge_exact(out: dict, b: float, c: float, s: Settings) -> dict:
    out |= {"base": b, "candidate": c, "reference": b, "method": "deterministic"}
    if b < 0 or c < 0:
        return out | {"verdict": "insufficient data", "reason": "an unknown (negative) value"}
    change = c - b
    rel = change / b if b else (math.inf if change else 0.0)
    out |= {"change": change, "rel_change": finite(rel),
            "ratio": finite(c / b if b else (math.inf if c else 1.0))}
    if change == 0:
        return out | {"verdict": "unchanged"}
    if abs(rel) < s.exact_threshold:
        return out | {"verdict": "changed"}
    return out | {"verdict": "regression" if change > 0 else "improvement"}


def _repeats_evidence(base: Sequence[float], cand: Sequence[float], b: float, c: float, m: PerfMetric,
                      s: Settings) -> tuple[bool, dict]:
    """Rules 1-3 of the module docstring for two runs' repeats."""
    slower = c >= b
    low, high = (base, cand) if slower else (cand, base)
    _, p = mann_whitney_greater(high, low)
    gap = min(high) - max(low)
    spread = max(base) - min(base)
    ratio = c / b if b else math.inf
    far = ratio >= s.pair_ratio if slower else ratio <= 1 / s.pair_ratio
    evidence = p <= s.alpha and gap >= max(spread, m.min_abs) and far
    return evidence, {"p_value": round(p, 4), "gap": gap, "spread": spread}


def judge(m: PerfMetric, base: Sequence[float], cand: Sequence[float],
          history: Sequence[float] = (), settings: Settings = Settings(),
          history_ids: Sequence[int | None] = ()) -> dict:
    """The verdict for one metric of one result.

    Args:
      m: the metric.
      base, cand: the base and candidate runs' samples (see ``samples``); their median
        is the run's value.
      history: the metric's value in earlier runs, oldest first, up to and including the
        base run's value (timings only).
      history_ids: run ids for ``history`` (used to name where steps happened).

    >>> judge(METRIC_BY_STAGE["execute"][0], [1.0e-5, 1.01e-5, 1.03e-5], [3.0e-5, 3.1e-5, 3.2e-5])["verdict"]
    'regression'
    """
    out: dict = {"metric": m.name, "unit": m.unit}
    if not cand or (not base and not history):
        return out | {"verdict": "insufficient data", "method": "none", "reason": "no value to compare"}
    c = median(cand)
    b = median(base) if base else history[-1]
    if not m.noisy:
        return _judge_exact(out, b, c, settings)
    out |= {"base": b, "candidate": c}
    hist = [v for v in history if v is not None and v > 0]
    ref, method, extra = b, "pair", {}
    evidence: bool | None = None
    if len(hist) >= settings.min_history and c > 0:
        segs = detect_steps(hist, log=True)
        last = segs[-1]
        ref = last.level
        logs = [math.log(v) for v in hist[last.start:last.end]]
        sigma = mad(logs) if len(logs) >= 5 else 0.0
        if sigma == 0:
            sigma = noise_sigma([math.log(v) for v in hist]) or 1e-12
        z = (math.log(c) - math.log(ref)) / sigma
        evidence, method = abs(z) >= settings.z, "history"
        steps = significant_steps(detect_steps(hist + [c], log=True), rel=settings.threshold, abs_=m.min_abs)
        ids = list(history_ids) + [None]
        extra = {"z": finite(round(z, 2)), "level": ref, "n_history": len(hist),
                 "steps": [{"index": st.at, "run_id": ids[st.at] if st.at < len(ids) else None,
                            "before": st.before, "after": st.after} for st in steps]}
    elif len(base) >= 2 and len(cand) >= 2:
        evidence, extra = _repeats_evidence(base, cand, b, c, m, settings)
        method = "mann-whitney"
    passed, change, rel = _gate(ref, c, m, settings)
    out |= {"reference": ref, "change": change, "rel_change": finite(rel), "ratio": finite(c / ref if ref else math.inf),
            "method": method, **extra}
    if not passed:
        return out | {"verdict": "noise"}
    if evidence is None:
        return out | {"verdict": "insufficient data", "reason": "one timing per run and too little history"}
    if not evidence:
        return out | {"verdict": "noise"}
    return out | {"verdict": "regression" if change > 0 else "improvement"}


def compare_rows(base: Row | None, cand: Row | None, history: Sequence[tuple[int | None, Row | None]] = (),
                 settings: Settings = Settings()) -> list[dict]:
    """Verdicts for every performance metric of one (harness, platform, stage) result;
    an exact metric that did not change is left out.

    ``history`` holds (run id, row) pairs in time order up to and including the base.
    """
    stage = (cand or base or {}).get("stage")
    out = []
    for m in METRIC_BY_STAGE.get(stage, ()):
        if cand is None or metric(cand, m.field) is None:
            continue
        if cand.get("status") not in ("ok", "unexpected_pass", "expected_fail"):
            continue
        if not m.noisy:
            v = judge(m, samples(base, m), samples(cand, m), settings=settings)
            if v["verdict"] != "unchanged":
                out.append(v)
            continue
        hs = [(rid, metric(r, m.field)) for rid, r in history]
        hs = [(rid, v) for rid, v in hs if v is not None]
        out.append(judge(m, samples(base, m), samples(cand, m), [v for _, v in hs], settings,
                         [rid for rid, _ in hs]))
    return out
