"""Accuracy tables as plain rows (``farm.store.accuracy.rows``): what moved between two jax
versions, the heat map's cells, the tolerance bounds derived from them, the text table.

Pure functions: rows in, rows out.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

Row = dict[str, Any]

#: the ULP margin a derived bound adds to the measured max (plus 0.5 for the rounding of
#: the compare stage's float64 reference to the dtype): float64 also covers that
#: reference's own error (NumPy/SciPy in float64 err by a few ULP of float64 themselves)
MARGIN = {"bfloat16": 1, "float16": 1, "float32": 1, "float64": 4}


def key(r: Row) -> tuple[str, str, str]:
    return r["primitive"], r["dtype"], r["platform"]


def _max(r: Row) -> float | None:
    v = r.get("max_ulp")
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def moved(old: list[Row], new: list[Row], threshold: float = 0.25) -> list[Row]:
    """The (primitive, dtype, platform) whose max ULP differs between two versions' rows by
    more than ``threshold`` ULP and 5%, or that ran in one and not the other; rows measured
    against a different reference (``reference_key``) are listed as not comparable."""
    a, b = {key(r): r for r in old}, {key(r): r for r in new}
    out = []
    for k in sorted(a.keys() & b.keys()):
        x, y = a[k], b[k]
        base = {"primitive": k[0], "dtype": k[1], "platform": k[2], "old": _max(x), "new": _max(y)}
        if x.get("reference_key") != y.get("reference_key"):
            out.append({**base, "change": "not comparable (different inputs or reference)"})
        elif (base["old"] is None) != (base["new"] is None):
            out.append({**base, "change": "runs now" if base["old"] is None else "no longer runs",
                        "error": y.get("error") or x.get("error")})
        elif base["old"] is not None and abs(base["new"] - base["old"]) > max(threshold, 0.05 * min(base["old"], base["new"])):
            out.append({**base, "change": "worse" if base["new"] > base["old"] else "better",
                        "worst": (y.get("worst") or [None])[0]})
    return out


#: the heat map's colour saturates here (log2 of 1 + ULP): beyond 2^16 ULP a result is simply wrong
HEAT_CAP = 16.0


def cells(rows: list[Row]) -> list[Row]:
    """The heat map's cells: one per row, coloured by log2(1 + max ULP on normal data), capped
    at ``HEAT_CAP`` (the subnormal-argument extremes would wash out everything else)."""
    out = []
    for r in rows:
        m = _max(r)
        n = r.get("max_ulp_normal")
        n = m if n is None or (isinstance(n, float) and math.isnan(n)) else float(n)
        out.append({"jax": r.get("jax"), "primitive": r["primitive"], "dtype": r["dtype"], "platform": r["platform"],
                    "max_ulp": m, "max_ulp_normal": n,
                    "log_ulp": None if n is None else min(HEAT_CAP, math.log2(1 + min(n, 2.0 ** 60))),
                    "column": f"{r['dtype']} {r['platform']}", "error": r.get("error")})
    return out


#: how many ULP a version may be worse than the best stored version before the difference is
#: a finding rather than tolerance (8: the flat elementwise band the farm used before the
#: table); beyond it the bound follows the best version, so a known regression stays red
SLACK = 8.0


def bounds(rows: list[Row], margin: dict[str, int] | None = None, slack: float = SLACK) -> dict[str, dict[str, int]]:
    """Per primitive and dtype, the ULP bound a tolerance may use: ``max_ulp_normal`` per
    version (the max over its platforms), the worst version's, but at most ``slack`` ULP above
    the best version's; plus 0.5, rounded up, plus ``margin``.

    The cap keeps a bound from absorbing a finding: float64 log1p at 125 ULP in jax
    0.8.3-0.10.2 and 2.03 in 0.12.0.1 gets 2.03 + 8, not 125, so the old versions fail
    compare there (docs/accuracy.md)."""
    m = MARGIN if margin is None else margin
    per_version: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in rows:
        v = r.get("max_ulp_normal")
        if v is None or (isinstance(v, float) and math.isnan(v)) or r.get("error"):
            continue
        cell, version = per_version[(r["primitive"], r["dtype"])], str(r.get("jax"))
        cell[version] = max(cell.get(version, 0.0), float(v))
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for (p, d), by_version in sorted(per_version.items()):
        worst, best = max(by_version.values()), min(by_version.values())
        v = min(worst, best + slack)
        out[p][d] = int(math.ceil(v + 0.5)) + m[d] if math.isfinite(v) else -1
    return dict(out)


def _dist(d: dict[str, int]) -> str:
    n = sum(d.values()) or 1
    return " ".join(f"{100 * d.get(k, 0) / n:5.1f}" for k in ("0", "<=0.5", "<=1", "<=2", "<=4", ">4"))


def _ulp(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 1e6 else f"{v:.2e}"


def render_text(rows: list[Row]) -> str:
    """One line per row: max ULP (all inputs, normal ones), the distribution in percent, the
    special-value agreement and the worst input."""
    lines = [f"{'primitive':<11} {'dtype':<8} {'platform':<8} {'n':>8} {'max_ulp':>9} {'normal':>9}  "
             f"{'%0':>5} {'<=.5':>5} {'<=1':>5} {'<=2':>5} {'<=4':>5} {'>4':>5}  special  worst input"]
    for r in rows:
        if r.get("error"):
            lines.append(f"{r['primitive']:<11} {r['dtype']:<8} {r['platform']:<8} {'':>8} {'-':>9} {'-':>9}  "
                         f"does not run: {r['error'][:80]}")
            continue
        sp = r.get("special") or {}
        bad = [k for k in ("nan", "inf", "signed_zero", "finite") if k in sp and sp[k][0] != sp[k][1]]
        special = "ok" if not bad else ",".join(f"{k} {sp[k][1] - sp[k][0]}" for k in bad)
        w = (r.get("worst") or [None])[0]
        worst = "" if not w else f"x={','.join(repr(v) for v in w['x'])} got {w['got']!r} exact {w['exact']!r}"
        lines.append(f"{r['primitive']:<11} {r['dtype']:<8} {r['platform']:<8} {r['n']:>8} {_ulp(_max(r)):>9} "
                     f"{_ulp(r.get('max_ulp_normal')):>9}  {_dist(r.get('distribution') or {})}  {special:<8} {worst}")
    return "\n".join(lines)


def render_moved(old: str, new: str, rows: list[Row]) -> str:
    if not rows:
        return f"no max ULP moved from jax {old} to {new}"
    lines = [f"max ULP moved from jax {old} to {new}:"]
    for m in rows:
        lines.append(f"  {m['primitive']:<11} {m['dtype']:<8} {m['platform']:<8} {_ulp(m['old']):>9} -> "
                     f"{_ulp(m['new']):>9}  {m['change']}")
    return "\n".join(lines)
