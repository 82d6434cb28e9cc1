"""Coverage: primitive x dtype x platform from a run's results; stale limitations marked."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin, url_filters
from farm.store import queries


def context() -> dict[str, Any]:
    filters = url_filters()
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        cov = queries.coverage(s, run.id, **filters)
    platforms = sorted({p for r in cov["rows"] for p in r["platforms"]})
    stale = {(x["primitive"], x["dtype"], x["platform"]) for x in cov["stale"]}
    for r in cov["rows"]:
        for p, cell in r["platforms"].items():
            cell["stale"] = (r["primitive"], r["dtype"], p) in stale
    return {"run": info, "filters": filters, "platforms": platforms, **cov}


def register(app: Flask) -> None:
    twin(app, "/coverage", "/coverage.json", "coverage", "coverage.html", context)
