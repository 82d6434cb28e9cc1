"""Trends: how the newest runs compare over time.

Per run: results by outcome (pass, fail, expected, skipped) per platform and per stage,
sweep wall time and throughput (harnesses per second), and each stage's time
distribution (5/25/50/75/95th percentiles of the timed results). The per-run numbers
come from ``farm.store.trends`` (kept per finished run: a full-catalog run is summarized
once); the page turns them into plot rows, the same rows its ``.json`` twin returns.
"""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards import plots
from dashboards.views import store, twin
from farm.errors import ConfigError
from farm.results import STAGES
from farm.store import trends

DEFAULT_RUNS = 20
MAX_RUNS = 200
_STAGE_ORDER = {s: i for i, s in enumerate(STAGES)}


def runs_arg() -> int:
    """``?runs=`` (how many newest runs), a whole number in 1..MAX_RUNS (ConfigError: a 400)."""
    text = request.args.get("runs", "").strip() or str(DEFAULT_RUNS)
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_RUNS:  # "³".isdigit() too
        raise ConfigError(f"runs must be a whole number from 1 to {MAX_RUNS}, not {text!r}")
    return int(text)


def label(run: dict[str, Any]) -> str:
    """A run's x-axis label: its name (names are unique)."""
    return str(run["name"])


def run_rows(runs: list[dict[str, Any]], sums: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run: wall time, harnesses, throughput and results by outcome class."""
    out = []
    for r in runs:
        by_class = dict.fromkeys(plots.CLASS_COLOURS, 0)
        for c in sums[r["id"]]["counts"]:
            by_class[plots.OUTCOME_CLASSES.get(c["status"], "skipped")] += c["n"]
        wall = r["duration_s"]
        out.append({"id": r["id"], "run": label(r), "status": r["status"], "started_at": r["started_at"],
                    "wall_s": wall, "harnesses": r["done"],
                    "per_s": r["done"] / wall if wall and wall > 0 else None, **by_class})
    return out


def outcome_rows(runs: list[dict[str, Any]], sums: dict[int, dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """``{run, <key>, outcome, n}``: results per run by outcome class, grouped by platform or stage."""
    acc: dict[tuple[str, str, str], int] = {}
    for r in runs:
        for c in sums[r["id"]]["counts"]:
            k = (label(r), c[key], plots.OUTCOME_CLASSES.get(c["status"], "skipped"))
            acc[k] = acc.get(k, 0) + c["n"]
    rows = [{"run": k[0], key: k[1], "outcome": k[2], "n": n} for k, n in acc.items()]
    if key == "stage":
        rows.sort(key=lambda x: _STAGE_ORDER.get(x["stage"], 99))
    return rows


def time_rows(runs: list[dict[str, Any]], sums: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """``{run, stage, n, p05, q1, median, q3, p95, total}`` per run and stage, stages in pipeline order."""
    rows = [{"run": label(r), **s} for r in runs for s in sums[r["id"]]["seconds"]]
    rows.sort(key=lambda x: _STAGE_ORDER.get(x["stage"], 99))
    return rows


def context() -> dict[str, Any]:
    n = runs_arg()
    with store().session() as s:
        runs = trends.recent_runs(s, n)
        sums = trends.summaries(s, runs)
    order = [label(r) for r in runs]
    per_run = run_rows(runs, sums)
    return {"runs_shown": n, "order": order, "runs": per_run,
            "wall": [{"run": r["run"], "series": "wall time", "value": r["wall_s"]} for r in per_run],
            "throughput": [{"run": r["run"], "series": "harnesses/s", "value": r["per_s"]} for r in per_run],
            "by_platform": outcome_rows(runs, sums, "platform"), "by_stage": outcome_rows(runs, sums, "stage"),
            "stage_times": time_rows(runs, sums)}


def register(app: Flask) -> None:
    twin(app, "/trends", "/trends.json", "trends", "trends.html", context, params=("runs",))
