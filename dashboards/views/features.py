"""Export features: the feature × platform matrix of a run (static and symbolic export,
the round trip, effects and callbacks, donation, PRNG keys, safety checks, device counts,
gradients), with counts per status (``farm.analysis.features``)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import FILTERS, store, twin, url_filters
from farm.analysis import features
from farm.store import queries


def context() -> dict[str, Any]:
    filters = url_filters()
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        rows = queries.results(s, run.id, stage=",".join(features.STAGES),
                               **{k: v for k, v in filters.items() if k != "catalog"})
    if "catalog" in filters:
        rows = [r for r in rows if r["catalog"] in filters["catalog"].split(",")]
    return {"run": info, "filters": filters, **features.matrix(rows)}


def register(app: Flask) -> None:
    twin(app, "/features", "/features.json", "features", "features.html", context, params=("run", *FILTERS))
