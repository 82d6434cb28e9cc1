"""The Pallas matrix: kernel × target (TPU generation, GPU platform and backend), what each
kernel's ``pallas_export`` records and its interpret-mode numbers say (docs/pallas.md).

Pure functions over the store's plain result rows (``farm.store.queries.results``).
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from farm.results import SEVERITY, worst_status

#: The column of a kernel's numbers: its interpret-mode run on the CPU against the float64 reference.
NUMERICS = "interpret (cpu)"


def _target_order(label: str) -> tuple[int, int, str]:
    """tpu generations oldest first (v2 ... v6e, 7, 7x, 8i), then cuda, then rocm."""
    platform, _, rest = label.partition(":")
    m = re.match(r"v?(\d+)(.*)", rest) if platform == "tpu" else None
    return ({"tpu": 0, "cuda": 1, "rocm": 2}.get(platform, 3), int(m.group(1)) if m else 0, m.group(2) if m else rest)


def matrix(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """{"targets": [labels], "kernels": [{"kernel", "group", "harnesses", "cells": {column: cell}}],
    "payloads": {kernel: {target: distinct payload sha256 count}}} where a cell is {"worst",
    "counts": {status: n}, "calls": [custom calls], "errors": [first distinct errors]}, and the
    columns are ``NUMERICS`` and each target label. A kernel is (group, primitive): ``tpu.matmul``."""
    cells: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    harnesses: dict[str, set[str]] = defaultdict(set)
    shas: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    targets: set[str] = set()
    for r in rows:
        stage = r["stage"]
        if stage not in ("pallas_export", "compare") or (stage == "compare" and r["platform"] != "cpu"):
            continue
        kernel = f"{r['group']}.{r['primitive']}"
        harnesses[kernel].add(r["harness"])
        column = r["platform"] if stage == "pallas_export" else NUMERICS
        if stage == "pallas_export":
            targets.add(column)
        cell = cells[kernel].setdefault(column, {"counts": Counter(), "calls": set(), "errors": []})
        cell["counts"][r["status"]] += 1
        facts = r.get("facts") or {}
        cell["calls"].update(facts.get("custom_calls") or [])
        for p in facts.get("payloads") or []:
            if p.get("sha256") and column.startswith("tpu:"):
                shas[kernel][r["harness"]].add(p["sha256"])
        if r["status"] in SEVERITY and r["status"] not in ("ok", "skipped") and r.get("error"):
            if r["error"] not in cell["errors"] and len(cell["errors"]) < 3:
                cell["errors"].append(r["error"][:200])
    out = []
    for kernel in sorted(cells):
        row = {}
        for column, cell in cells[kernel].items():
            row[column] = {"worst": worst_status(cell["counts"]), "counts": dict(cell["counts"]),
                           "calls": sorted(cell["calls"]), "errors": cell["errors"]}
        out.append({"kernel": kernel, "group": kernel.partition(".")[0], "harnesses": len(harnesses[kernel]),
                    "cells": row,
                    "generation_dependent": sorted(h for h, s in shas[kernel].items() if len(s) > 1)})
    return {"columns": [NUMERICS, *sorted(targets, key=_target_order)], "kernels": out}
