"""Plugin boundary: harnesses whose modules carry non-StableHLO ops or unguaranteed
custom calls (from the census stage's facts), per platform."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from flask import Flask, request

from dashboards.views import FILTERS, store, twin, url_filters
from farm.store import queries


def context() -> dict[str, Any]:
    filters = url_filters()
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        rows = queries.boundary(s, run.id, **filters)
    by_op: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        for op in r["non_stablehlo"] + r["unguaranteed"]:
            by_op[op].add(r["harness"])
    return {"run": info, "filters": filters, "rows": rows,
            "ops": {op: sorted(hs) for op, hs in sorted(by_op.items())}}


def register(app: Flask) -> None:
    twin(app, "/boundary", "/boundary.json", "boundary", "boundary.html", context, params=("run", *FILTERS))
