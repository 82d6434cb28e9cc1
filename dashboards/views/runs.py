"""Runs: every run with its environment, duration and totals, and its harnesses grouped
by the environment of the workers that ran them; pick two to compare."""
from __future__ import annotations

from typing import Any

from flask import Flask

from dashboards.views import page_args, pager, store, twin
from farm.store import queries
from farm.analysis.workers import group_results
from farm.store.workers import outcome_counts


def context() -> dict[str, Any]:
    page, limit, offset = page_args(50)
    with store().session() as s:
        total = queries.count_runs(s)
        runs = queries.list_runs(s, limit=limit, offset=offset)
        counts = outcome_counts(s, [r["id"] for r in runs])
    by_env = {rid: group_results(envs, rows) for rid, (envs, rows) in counts.items()}
    for r in runs:
        r["worker_environments"] = by_env.get(r["id"], [])
    return {"runs": runs, "pager": pager(page, limit, total)}


def register(app: Flask) -> None:
    twin(app, "/runs", "/runs.json", "runs", "runs.html", context, params=("page",))
