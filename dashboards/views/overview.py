"""Overview: a run's primitive x platform matrix, worst status per cell, counts on hover.

Filters (primitive, dtype, platform, status, catalog, and ``shapes``: the static records,
the symbolic variant's or both) live in the URL; picking a primitive drills down to its
dtype x platform matrix and the harnesses below it.
"""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import FILTERS, check_filters, one_of, page_args, pager, shapes_arg, store, twin, url_filters
from farm.errors import RunNotFound
from farm.store import queries


def context() -> dict[str, Any]:
    ref = request.args.get("run", "latest")
    filters = url_filters()
    by = "dtype" if one_of("by", ("primitive", "dtype"), "primitive") == "dtype" or "primitive" in filters \
        else "primitive"
    page, limit, offset = page_args()
    shapes = shapes_arg()
    with store().session() as s:
        try:
            run = queries.resolve_run(s, ref)
        except RunNotFound:
            if ref != "latest":
                raise
            return {"run": None, "by": by, "filters": filters, "shapes": shapes, "symbolic_run": False, "matrix": {},
                    "platforms": [], "choices": {}, "harnesses": [], "pager": pager(1, limit, 0), "comparable": False}
        info = queries.run_dict(s, run, with_counts=False)
        cells = queries.run_cells(s, run.id, shapes)  # one scan: the filter values, the matrix and the counts
        info["done"] = queries.done_count(s, run.id)
        info["status_counts"] = queries.status_of(cells)
        choices = queries.values_of(cells)
        check_filters(filters, choices)
        m = queries.matrix_of(cells, by=by, **filters)
        comparable = queries.count_runs(s) > 1
        harnesses: list[dict[str, Any]] = []
        total = 0
        if filters or shapes != "both":
            total, harnesses = queries.harness_page(s, run.id, limit=limit, offset=offset, shapes=shapes, **filters)
    platforms = sorted({p for cells in m.values() for p in cells})
    symbolic = "symbolic" in ((info.get("filters") or {}).get("shapes") or ())  # swept with --shapes symbolic
    return {"run": info, "by": by, "filters": filters, "shapes": shapes, "symbolic_run": symbolic, "matrix": m, "platforms": platforms, "choices": choices,
            "harnesses": harnesses, "pager": pager(page, limit, total), "comparable": comparable}


def register(app: Flask) -> None:
    twin(app, "/", "/overview.json", "overview", "overview.html", context,
         params=("run", "by", "page", "shapes", *FILTERS))
