"""Failures: a run's failing records as clusters (one per cause), not cells; new clusters
on top, then worst first; each with its harnesses, platforms, first and last run seen, its
acknowledgement, and the command that reproduces its example (``farm repro``). ``?shapes=``:
the clusters of static or of symbolic stages alone; a symbolic-only cluster says so (its
``signature.scope``)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import shapes_arg, store, twin
from farm.analysis.shapes import kind_of
from farm.reports import triage


def context() -> dict[str, Any]:
    ref = request.args.get("run", "latest").strip() or "latest"
    shapes = shapes_arg()
    with store().session() as s:
        rep = triage.triage(s, ref, shapes=shapes)
    clusters = sorted(rep["clusters"], key=lambda c: not c["new"])  # stable: worst first within each
    for c in clusters:
        ex = c["example"]
        c["repro"] = f"farm repro {ex['harness']} --run {ex['run']['name']} --platform {ex['platform']}"
    symbolic = shapes != "both" or any(kind_of(c["signature"]["stage"]) == "symbolic" for c in clusters)
    return {**rep, "ref": ref, "shapes": shapes, "offer_shapes": symbolic, "clusters": clusters}


def register(app: Flask) -> None:
    twin(app, "/failures", "/failures.json", "failures", "failures.html", context, params=("run", "shapes"))
