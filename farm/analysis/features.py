"""The export-feature × platform matrix (issue 43): for each ``jax.export`` feature the farm
checks, how its records came out on each platform or export configuration.

Pure: plain result rows in, counts out. A feature is read off a record's stage (and, for
effects and export features, the harness's primitive or the feature's kind), so a new
stage shows up as its own row rather than disappearing.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any
from farm.results import WORST_FIRST

#: The stages the matrix reads, in the order their features are listed.
STAGES = ("export", "serialize", "symbolic_export", "symbolic_serialize", "symbolic_call", "effects_export",
          "export_feature", "vjp", "vjp2")
#: Stage -> the feature its records are about (effects and export features: refined below).
_FEATURE = {"export": "export (static shapes)", "serialize": "serialize round trip",
            "symbolic_export": "symbolic shapes: export", "symbolic_serialize": "symbolic shapes: round trip",
            "symbolic_call": "symbolic shapes: calls"}
#: Columns first in this order; export configurations ("cpu+cuda") after, as they come.
_COLUMNS = ("cpu", "cuda", "rocm", "tpu", "export", "native")
#: Worst first: what a cell's colour follows.
_WORST = WORST_FIRST


def feature_of(row: Mapping[str, Any]) -> str:
    """The feature a result row is about."""
    stage = row["stage"]
    if stage == "effects_export":
        return f"effects: {row['primitive']}"
    if stage == "export_feature":
        kind = (row.get("facts") or {}).get("kind")
        return f"export feature: {kind or row['primitive']}"
    if stage in ("vjp", "vjp2"):
        return f"gradients: order {2 if stage == 'vjp2' else 1}"
    return _FEATURE.get(stage, stage)


def matrix(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """{"features": [...], "columns": [...], "cells": {feature: {column: {status: n}}},
    "worst": {feature: {column: status}}, "harnesses": {feature: n}} over the rows of
    ``STAGES``."""
    cells: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    harnesses: dict[str, set[str]] = defaultdict(set)
    order: dict[str, int] = {}
    for r in rows:
        if r["stage"] not in STAGES:
            continue
        f = feature_of(r)
        order.setdefault(f, STAGES.index(r["stage"]))
        cells[f][r["platform"]][r["status"]] += 1
        harnesses[f].add(r["harness"])
    features = sorted(cells, key=lambda f: (order[f], f))
    seen = {c for f in cells.values() for c in f}
    columns = [c for c in _COLUMNS if c in seen] + sorted(seen - set(_COLUMNS), key=lambda c: (-c.count("+"), c))
    worst = {f: {c: next(s for s in _WORST if s in n) if (n := cells[f].get(c)) else None for c in columns}
             for f in features}
    return {"features": features, "columns": columns,
            "cells": {f: {c: dict(cells[f][c]) for c in columns if c in cells[f]} for f in features},
            "worst": {f: {c: s for c, s in w.items() if s} for f, w in worst.items()},
            "harnesses": {f: len(harnesses[f]) for f in features}}
