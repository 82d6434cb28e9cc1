"""Plain-data helpers over result rows (the dicts ``farm.store.queries.results`` returns)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

#: A result's identity across runs: the harness fingerprint (what was measured), the
#: platform and the stage. Equal keys in two runs are comparable results.
Key = tuple[str, str, str]

Row = Mapping[str, Any]


def key(row: Row) -> Key:
    return (row["fingerprint"], row["platform"], row["stage"])


def index(rows: Iterable[Row]) -> dict[Key, Row]:
    """Rows by key (the last row wins if a key repeats)."""
    return {key(r): r for r in rows}


def number(v: Any) -> float | None:
    """A metric value as a float: the store keeps inf/nan as strings; None stays None."""
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def metric(row: Row | None, name: str) -> float | None:
    """``name`` from the row's metrics, or the row's ``seconds`` for ``name == "seconds"``."""
    if row is None:
        return None
    if name == "seconds":
        return number(row.get("seconds"))
    return number((row.get("metrics") or {}).get(name))


def finite(v: float | None) -> float | str | None:
    """JSON-safe number: inf and nan become strings, like the store keeps them."""
    if v is None or math.isfinite(v):
        return v
    return str(v)


def env_fingerprint(run: Mapping[str, Any] | None) -> str | None:
    return ((run or {}).get("environment") or {}).get("fingerprint")


def run_brief(run: Mapping[str, Any]) -> dict[str, Any]:
    """What a report says about a run."""
    return {k: run.get(k) for k in ("id", "name", "kind", "status", "started_at", "finished_at")} | {
        "environment": dict(run.get("environment") or {})}
