"""Numeric drift: error metrics (max abs / rel / ULP error) against the reference that grow
beyond tolerance, or grow by a large factor while still inside it."""
from __future__ import annotations

import math
from collections.abc import Sequence

from farm.analysis.rows import Row, finite, metric

ERROR_METRICS = ("max_abs_err", "max_rel_err", "max_ulp_err")
VERDICTS = ("exceeds_tolerance", "grew", "shrank", "back_in_tolerance")
REGRESSIONS = ("exceeds_tolerance", "grew")


def _floor(name: str, row: Row) -> float:
    """The smallest error worth a ratio: 1 ULP, or 1% of the tolerance."""
    facts = row.get("facts") or {}
    if name == "max_ulp_err":
        return 1.0
    tol = facts.get("atol") if name == "max_abs_err" else facts.get("rtol")
    tol = float(tol) if tol else 0.0
    return max(tol * 0.01, 1e-30)


def _within(row: Row | None) -> bool | None:
    if row is None:
        return None
    mm = metric(row, "mismatches")
    if mm is not None:
        return mm == 0
    return row.get("status") in ("ok", "unexpected_pass") if row.get("status") in ("ok", "fail", "unexpected_pass") else None


def drift(base: Row | None, cand: Row | None, history: Sequence[Row | None] = (), factor: float = 4.0) -> dict | None:
    """The numeric verdict for one comparing result (stage compare or crossexec), or None.

    Args:
      base, cand: the two runs' rows for the same harness, platform and stage.
      history: earlier rows of the same result (oldest first), shown as the error's history.
      factor: growth of an error, relative to ``max(base, floor)``, that counts as drift.
    """
    if cand is None or base is None:
        return None
    if not any(metric(cand, n) is not None for n in ERROR_METRICS):
        return None  # nothing measured (skipped): the status flip says why
    wb, wc = _within(base), _within(cand)
    metrics = {}
    for n in ERROR_METRICS:
        b, c = metric(base, n), metric(cand, n)
        if c is None and b is None:
            continue
        fl = _floor(n, cand)
        b0 = b if b is not None else 0.0
        c0 = c if c is not None else 0.0
        ratio = max(c0, fl) / max(b0, fl) if not (math.isinf(c0) and math.isinf(b0)) else 1.0
        metrics[n] = {"base": finite(b), "candidate": finite(c), "ratio": finite(round(ratio, 3)),
                      "history": [finite(metric(h, n)) for h in history]}
    verdict = None
    if wc is False and wb is not False:
        verdict = "exceeds_tolerance"
    elif wc is not False and wb is False:
        verdict = "back_in_tolerance"
    else:
        ratios = [m["ratio"] for m in metrics.values() if isinstance(m["ratio"], (int, float))]
        big = max(ratios, default=1.0)
        small = min(ratios, default=1.0)
        if big >= factor:
            verdict = "grew"
        elif small <= 1.0 / factor:
            verdict = "shrank"
    if verdict is None:
        return None
    ratios = [float(m["ratio"]) for m in metrics.values()]
    return {"kind": "numeric", "verdict": verdict, "regression": verdict in REGRESSIONS,
            "harness": cand["harness"], "fingerprint": cand["fingerprint"], "primitive": cand["primitive"],
            "dtype": cand["dtype"], "platform": cand["platform"], "stage": cand["stage"],
            "against": (cand.get("facts") or {}).get("against"),
            "tolerance": {k: (cand.get("facts") or {}).get(k) for k in ("rtol", "atol")},
            "max_ratio": finite(max(ratios, default=1.0)), "metrics": metrics,
            "mismatches": {"base": finite(metric(base, "mismatches")), "candidate": finite(metric(cand, "mismatches"))}}
