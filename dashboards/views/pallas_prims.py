"""Pallas primitives: the primitive × target support matrix of a run (every lax primitive inside a
kernel body, per TPU generation and GPU backend, and in interpret mode; ``farm.analysis.pallas_matrix``,
docs/pallas.md), optionally against another run's (``against``: the cells that differ). ``family``:
another family's rows, as ``farm pallas-matrix --family`` (``pallas_features``: the feature × target
matrix)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin
from farm.analysis import pallas_matrix as pm
from farm.errors import ConfigError
from farm.store import queries


#: The families whose harnesses the page's matrix is made of (one kernel each per row).
FAMILIES = (pm.FAMILY, "pallas_features")


def _matrix(s: Any, name: str, by: str, family: str) -> tuple[dict[str, Any], dict[str, Any]]:
    run = queries.resolve_run(s, name)
    rows = queries.results(s, run.id, stage=",".join(pm.STAGES))
    return queries.run_dict(s, run, with_counts=False), pm.matrix(rows, by=by, family=family)


def context() -> dict[str, Any]:
    by = request.args.get("by", "dtype")
    if by not in ("dtype", "primitive"):
        raise ConfigError(f"by must be dtype or primitive, not {by!r}")
    family = request.args.get("family", pm.FAMILY)
    if family not in FAMILIES:
        raise ConfigError(f"family must be one of {', '.join(FAMILIES)}, not {family!r}")
    with store().session() as s:
        info, m = _matrix(s, request.args.get("run", "latest"), by, family)
        against = request.args.get("against")
        other = _matrix(s, against, by, family) if against else None
    out: dict[str, Any] = {"run": info, "family": family, "families": FAMILIES, **m}
    if other is not None:
        out["against"] = other[0]
        out["diff"] = pm.diff(other[1], m)
    for row in out["rows"]:
        row["label"] = pm.row_label(row)
        for cell in row["cells"].values():
            cell["text"] = pm.cell_text(cell)
    return out


def register(app: Flask) -> None:
    twin(app, "/pallas/prims", "/pallas/prims.json", "pallas_prims", "pallas_prims.html", context,
         params=("run", "by", "against", "family"))
