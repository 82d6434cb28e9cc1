"""Coverage: primitive x dtype x platform from a run's results; stale limitations marked;
per group, which harnesses got an independent numeric verdict (reference, invariant, none
with the reason), from the run's compare records."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin, url_filters
from farm.analysis import verdicts
from farm.store import queries, verdicts as verdict_rows


def context() -> dict[str, Any]:
    filters = url_filters()
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        cov = queries.coverage(s, run.id, **filters)
        harnesses, records = verdict_rows.verdict_records(s, run.id, **{k: v for k, v in filters.items()
                                                                  if k not in ("status", "stage")})
    platforms = sorted({p for r in cov["rows"] for p in r["platforms"]})
    stale = {(x["primitive"], x["dtype"], x["platform"]) for x in cov["stale"]}
    for r in cov["rows"]:
        for p, cell in r["platforms"].items():
            cell["stale"] = (r["primitive"], r["dtype"], p) in stale
    return {"run": info, "filters": filters, "platforms": platforms, **cov,
            "verdicts": verdicts.from_records(harnesses, records)}


def register(app: Flask) -> None:
    twin(app, "/coverage", "/coverage.json", "coverage", "coverage.html", context)
