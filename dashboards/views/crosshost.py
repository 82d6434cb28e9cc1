"""Cross-host: a device host's run (imported bundle) as the lowered-on × run-on table,
its disagreements and its slowest harnesses (``farm.analysis.crosshost``)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin
from farm.analysis.crosshost import summarize
from farm.store import queries


def context() -> dict[str, Any]:
    platform = request.args.get("platform", "cuda")
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        rows = queries.results(s, run.id)
    return {"run": info, "platform": platform, **summarize(rows, platform)}


def register(app: Flask) -> None:
    twin(app, "/crosshost", "/crosshost.json", "crosshost", "crosshost.html", context)
