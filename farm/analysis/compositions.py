"""The composition × family matrix (``--compositions``, docs/compositions.md): for each family,
how its artifacts came out inside each larger program (jit with shardings, vmap, grad, scan,
cond, while, a nested export, donation) and their own call where it failed.

Pure: plain result rows in, counts out (``farm.analysis.features.counted``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from farm.analysis.features import counted

#: The stage the matrix reads.
STAGE = "composition"
#: Columns in this order (the artifact's own call, where it failed, first).
COLUMNS = ("call", "jit_sharded", "vmap", "grad", "scan", "cond", "while", "nested", "donated")


def matrix(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """{"families": [...], "columns": [...], "cells": {family: {composition: {status: n}}},
    "worst": {family: {composition: status}}, "harnesses": {family: n}, "totals": {composition:
    {status: n}}} over the ``composition`` rows."""
    picked = [r for r in rows if r["stage"] == STAGE]
    m = counted(picked, lambda r: r.get("family") or "?", lambda r: 0, COLUMNS)
    totals: dict[str, dict[str, int]] = {}
    for cells in m["cells"].values():
        for c, n in cells.items():
            for st, k in n.items():
                totals.setdefault(c, {})[st] = totals.setdefault(c, {}).get(st, 0) + k
    return {"families": m.pop("rows"), **m, "totals": totals}
