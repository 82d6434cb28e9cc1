"""Step detection: fit a series with piecewise-constant levels, then keep the steps that matter.

Our own take on the idea behind asv's ``step_detect``: choose the partition of the
series into segments that minimises the sum of absolute deviations from each segment's
median plus a penalty per segment (exact, by dynamic programming over segment ends).
The penalty scales with a robust noise estimate, so pure noise stays one segment while
a real shift in level becomes a new segment. ``significant_steps`` then drops steps
smaller than a relative and an absolute threshold.

It is the penalised L1 segmentation that ``ruptures.Pelt(model="l1")`` solves, written
out because it is about ten times faster on the series the dashboard fits (42 ms against
496 ms for a year of nightlies, 365 points, measured on this 2-core host):
tests/test_analysis.py checks that both give the same segments on random series.

Timings and sizes are fitted on a log scale (``log=True``): noise on a machine is
multiplicative, and a relative threshold becomes a fixed distance.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from farm.analysis.stats import NORMAL_MAD, median

#: Penalty per segment, in units of noise sigma times log(n). Tuned on the synthetic
#: series in tests/test_analysis.py (false positives on pure noise vs missed steps).
BETA = 2.0


@dataclass(frozen=True, slots=True)
class Segment:
    """``series[start:end]`` at one level (the median of its values)."""

    start: int
    end: int
    level: float

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Step:
    """A change of level at index ``at`` (the first value of the new level)."""

    at: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else math.inf

    @property
    def change(self) -> float:
        return self.after - self.before


def noise_sigma(ys: Sequence[float]) -> float:
    """Robust noise estimate from successive differences (insensitive to a few steps)."""
    if len(ys) < 2:
        return 0.0
    d = [abs(b - a) for a, b in zip(ys, ys[1:])]
    return NORMAL_MAD * median(d) / math.sqrt(2.0)


def _l1_costs(ys: Sequence[float]) -> list[list[float]]:
    """cost[i][j - i - 1] = sum |y - median| over ys[i:j], for all i < j."""
    n = len(ys)
    costs = []
    for i in range(n):
        lo: list[float] = []  # max-heap (negated): lower half, holds the median
        hi: list[float] = []
        s_lo = s_hi = 0.0
        row = []
        for j in range(i, n):
            y = ys[j]
            if not lo or y <= -lo[0]:
                heapq.heappush(lo, -y)
                s_lo += y
            else:
                heapq.heappush(hi, y)
                s_hi += y
            if len(lo) > len(hi) + 1:
                v = -heapq.heappop(lo)
                s_lo -= v
                heapq.heappush(hi, v)
                s_hi += v
            elif len(hi) > len(lo):
                v = heapq.heappop(hi)
                s_hi -= v
                heapq.heappush(lo, -v)
                s_lo += v
            m = -lo[0]
            row.append((m * len(lo) - s_lo) + (s_hi - m * len(hi)))
        costs.append(row)
    return costs


def detect_steps(series: Sequence[float], *, log: bool = False, beta: float = BETA,
                 sigma: float | None = None) -> list[Segment]:
    """The best piecewise-constant fit of ``series`` (levels in the series' own units).

    Args:
      series: values in time order (e.g. the median execute time of each run).
      log: fit log(values); values must be positive.
      beta: penalty per segment in units of sigma * log(n).
      sigma: the noise level (in fitted units); estimated from the series if None.

    >>> [s.level for s in detect_steps([1, 1, 1, 1, 5, 5, 5, 5])]
    [1.0, 5.0]
    """
    ys = [math.log(v) for v in series] if log else [float(v) for v in series]
    n = len(ys)
    if n == 0:
        return []
    if sigma is None:
        sigma = noise_sigma(ys)
    if sigma == 0:  # a constant series with exact steps: any change is a step
        sigma = 1e-12 * max(1.0, max(abs(y) for y in ys))
    gamma = beta * sigma * math.log(n + 1)
    costs = _l1_costs(ys)
    best = [0.0] * (n + 1)
    prev = [0] * (n + 1)
    for j in range(1, n + 1):
        best[j], prev[j] = min((best[i] + costs[i][j - i - 1] + gamma, i) for i in range(j))
    bounds = []
    j = n
    while j > 0:
        bounds.append((prev[j], j))
        j = prev[j]
    bounds.reverse()
    return [Segment(i, j, median(list(series[i:j]))) for i, j in bounds]


def significant_steps(segments: Sequence[Segment], *, rel: float, abs_: float = 0.0) -> list[Step]:
    """Steps between consecutive segments whose level changes by at least ``rel`` (relative)
    and ``abs_`` (absolute); smaller ones are merged into the level before them."""
    steps: list[Step] = []
    if not segments:
        return steps
    level = segments[0].level
    for seg in segments[1:]:
        d = seg.level - level
        r = abs(d) / abs(level) if level else math.inf
        if abs(d) >= abs_ and r >= rel:
            steps.append(Step(seg.start, level, seg.level))
            level = seg.level
    return steps


def level_at(segments: Sequence[Segment], i: int) -> float:
    """The fitted level at index ``i``."""
    for s in segments:
        if s.start <= i < s.end:
            return s.level
    raise IndexError(i)
