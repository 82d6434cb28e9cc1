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
    picked = [r for r in rows if r["stage"] in STAGES]
    m = counted(picked, feature_of, lambda r: STAGES.index(r["stage"]), _COLUMNS)
    return {"features": m.pop("rows"), **m}


def counted(rows: Iterable[Mapping[str, Any]], row_of: Any, rank_of: Any, first_columns: tuple[str, ...]
            ) -> dict[str, Any]:
    """A status matrix: per row (``row_of(r)``, listed by ``rank_of`` of its first record, then
    by name) and column (the record's platform: ``first_columns`` first, the others after,
    export configurations by their size), how many records of each status, the worst, and how
    many harnesses each row holds. {"rows", "columns", "cells", "worst", "harnesses"}."""
    cells: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    harnesses: dict[str, set[str]] = defaultdict(set)
    order: dict[str, Any] = {}
    for r in rows:
        f = row_of(r)
        order.setdefault(f, rank_of(r))
        cells[f][r["platform"]][r["status"]] += 1
        harnesses[f].add(r["harness"])
    names = sorted(cells, key=lambda f: (order[f], f))
    seen = {c for f in cells.values() for c in f}
    columns = [c for c in first_columns if c in seen] + sorted(seen - set(first_columns), key=lambda c: (-c.count("+"), c))
    worst = {f: {c: next(s for s in _WORST if s in n) if (n := cells[f].get(c)) else None for c in columns}
             for f in names}
    return {"rows": names, "columns": columns,
            "cells": {f: {c: dict(cells[f][c]) for c in columns if c in cells[f]} for f in names},
            "worst": {f: {c: s for c, s in w.items() if s} for f, w in worst.items()},
            "harnesses": {f: len(harnesses[f]) for f in names}}
