"""Failures: a run's failing records as clusters (one per cause), not cells; new clusters
on top, then worst first; each with its harnesses, platforms, first and last run seen, its
acknowledgement, and the command that reproduces its example (``farm repro``)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin
from farm.reports import triage


def context() -> dict[str, Any]:
    ref = request.args.get("run", "latest").strip() or "latest"
    with store().session() as s:
        rep = triage.triage(s, ref)
    clusters = sorted(rep["clusters"], key=lambda c: not c["new"])  # stable: worst first within each
    for c in clusters:
        ex = c["example"]
        c["repro"] = f"farm repro {ex['harness']} --run {ex['run']['name']} --platform {ex['platform']}"
    return {**rep, "ref": ref, "clusters": clusters}


def register(app: Flask) -> None:
    twin(app, "/failures", "/failures.json", "failures", "failures.html", context, params=("run",))
