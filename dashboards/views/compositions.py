"""Compositions: the composition × family matrix of a run (each family's artifacts inside jit with
shardings, vmap, grad, scan, cond, while, a nested export and with donation), with counts per
status (``farm.analysis.compositions``, docs/compositions.md)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import FILTERS, store, twin, url_filters
from farm.analysis import compositions
from farm.store import queries


def context() -> dict[str, Any]:
    filters = url_filters()
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        rows = queries.results(s, run.id, stage=compositions.STAGE,
                               **{k: v for k, v in filters.items() if k != "catalog"})
    if "catalog" in filters:
        rows = [r for r in rows if r["catalog"] in filters["catalog"].split(",")]
    return {"run": info, "filters": filters, **compositions.matrix(rows)}


def register(app: Flask) -> None:
    twin(app, "/compositions", "/compositions.json", "compositions", "compositions.html", context,
         params=("run", *FILTERS))
