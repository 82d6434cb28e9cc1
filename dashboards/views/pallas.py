"""Pallas kernels: the kernel × target matrix of a run (TPU generations, cuda/rocm with
Mosaic GPU or Triton) and each kernel's interpret-mode numbers (docs/pallas.md)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin
from farm.analysis.pallas import matrix
from farm.analysis.pallas_matrix import FAMILY as PRIMS
from farm.store import queries


def context() -> dict[str, Any]:
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        rows = [r for stage in ("pallas_export", "compare") for r in queries.results(s, run.id, stage=stage)
                if r["family"] != PRIMS]  # one primitive per kernel: their own page, /pallas/prims
    return {"run": info, **matrix(rows)}


def register(app: Flask) -> None:
    twin(app, "/pallas", "/pallas.json", "pallas", "pallas.html", context, params=("run",))
