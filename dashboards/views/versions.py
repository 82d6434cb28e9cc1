"""Versions: a version sweep's exported-on × run-on table (``farm sweep --jax``, ``farm versions``).

The diagonal is each jax version's own verdicts on its own catalog; every other cell, the
row version's serialized exports deserialized and run by the column version (xhost),
compared with the reference, with the exporting version's outputs and with the running
version's own lowering. ``?name=`` picks the sweep (default: the newest)."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin
from farm.analysis.versions import matrix
from farm.errors import UnknownName
from farm.run.versions.matrix import load, sweeps


def context() -> dict[str, Any]:
    names = sweeps(store())
    name = request.args.get("name", "").strip() or (names[0] if names else "")
    if not names:
        return {"name": None, "sweeps": [], "nothing": (
            "No version sweep in this database. Make one with `farm sweep --jax 0.8.3,0.9.2,0.10.2 --name NAME` "
            "(each version in its own cached venv, then every version's exports run by every other).")}
    if name not in names:
        raise UnknownName("name", name, names)
    native, cross, stats = load(store(), name)
    return {"name": name, "sweeps": names, "nothing": None, **matrix(native, cross, stats)}


def register(app: Flask) -> None:
    twin(app, "/versions", "/versions.json", "versions", "versions.html", context, params=("name",))
