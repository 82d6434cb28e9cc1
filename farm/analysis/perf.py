"""Performance verdicts for one metric of one result: regression, improvement, noise or
insufficient data, with the numbers behind them.

A change must pass a gate first: a relative change of at least ``threshold`` AND an
absolute change of at least the metric's ``min_abs`` (a 20 µs kernel that takes 40 µs
on a busy machine is not a regression). Then the evidence decides:

- deterministic metrics (bytes): the gate alone;
- with a history of at least ``min_history`` runs: the series up to the base is fitted
  with ``detect_steps``; the candidate is judged against the base's level with a robust
  z-score of the noise in that level (log scale), like a lookback z-score;
- otherwise with repeats on both sides: a one-sided exact Mann-Whitney test on the
  repeats each run kept (min, median, max);
- otherwise (one timing each): ``insufficient data``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from farm.analysis.rows import Row, finite, metric
from farm.analysis.stats import mad, mann_whitney_greater
from farm.analysis.steps import detect_steps, noise_sigma, significant_steps

VERDICTS = ("regression", "improvement", "noise", "insufficient data")


@dataclass(frozen=True, slots=True)
class PerfMetric:
    """Where a performance number lives in a result row, and how noisy it is."""

    name: str  # the name reports use
    stage: str  # the row's stage
    field: str  # metrics key, or "seconds" for the row's wall time
    unit: str  # "s" or "bytes"
    min_abs: float  # smallest absolute change that can count
    noisy: bool = True
    min_field: str | None = None  # metrics keys of the repeats' spread, if any
    max_field: str | None = None


METRICS = (
    PerfMetric("execute_s", "execute", "execute_s", "s", 1e-3, min_field="execute_min_s",
               max_field="execute_max_s"),
    PerfMetric("compile_s", "compile", "compile_s", "s", 0.02),
    PerfMetric("lower_s", "lower", "seconds", "s", 0.01),
    PerfMetric("artifact_bytes", "serialize", "artifact_bytes", "bytes", 64, noisy=False),
    PerfMetric("peak_memory_bytes", "compile", "peak_memory_bytes", "bytes", 1024, noisy=False),
)
METRIC_BY_STAGE: dict[str, list[PerfMetric]] = {}
for _m in METRICS:
    METRIC_BY_STAGE.setdefault(_m.stage, []).append(_m)


@dataclass(frozen=True, slots=True)
class Settings:
    threshold: float = 0.2  # relative change that counts
    alpha: float = 0.05  # Mann-Whitney significance
    z: float = 4.0  # lookback z-score that counts
    min_history: int = 5  # runs up to the base needed for the history method


def samples(row: Row | None, m: PerfMetric) -> list[float]:
    """The repeats a run kept for ``m``: [min, median, max] when it has them, else [value]."""
    v = metric(row, m.field)
    if v is None:
        return []
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


def judge(m: PerfMetric, base: Sequence[float], cand: Sequence[float],
          history: Sequence[float] = (), settings: Settings = Settings(),
          history_ids: Sequence[int | None] = ()) -> dict:
    """The verdict for one metric of one result.

    Args:
      m: the metric.
      base, cand: the base and candidate runs' samples (see ``samples``); the middle one
        is the run's value.
      history: the metric's value in earlier runs, oldest first, up to and including the
        base run's value.
      history_ids: run ids for ``history`` (used to name where steps happened).
    """
    out: dict = {"metric": m.name, "unit": m.unit}
    if not cand or (not base and not history):
        return out | {"verdict": "insufficient data", "method": "none", "reason": "no value to compare"}
    c = sorted(cand)[len(cand) // 2]
    b = sorted(base)[len(base) // 2] if base else history[-1]
    out |= {"base": b, "candidate": c}
    hist = [v for v in history if v is not None and v > 0]
    ref, method, extra = b, "pair", {}
    evidence: bool | None = None
    if not m.noisy:
        evidence, method = True, "deterministic"
    elif len(hist) >= settings.min_history and c > 0:
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
        up = c >= b
        _, p = mann_whitney_greater(cand, base) if up else mann_whitney_greater(base, cand)
        evidence, method = p <= settings.alpha, "mann-whitney"
        extra = {"p_value": round(p, 4)}
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
    """Verdicts for every performance metric of one (harness, platform, stage) result.

    ``history`` holds (run id, row) pairs in time order up to and including the base.
    """
    stage = (cand or base or {}).get("stage")
    out = []
    for m in METRIC_BY_STAGE.get(stage, ()):
        if cand is None or metric(cand, m.field) is None:
            continue
        if cand.get("status") not in ("ok", "unexpected_pass", "expected_fail"):
            continue
        hs = [(rid, metric(r, m.field)) for rid, r in history]
        hs = [(rid, v) for rid, v in hs if v is not None]
        out.append(judge(m, samples(base, m), samples(cand, m), [v for _, v in hs], settings,
                         [rid for rid, _ in hs]))
    return out
