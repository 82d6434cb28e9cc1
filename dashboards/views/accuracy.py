"""Accuracy: the max ULP error of each elementwise primitive by dtype and platform, against a
correctly rounded reference (``farm accuracy``), per jax version.

``?jax=`` picks the version (default: the newest stored); ``?primitive=`` drills down to
that primitive's distribution, worst inputs and special-value agreement, and its max ULP
in every stored version. What moved since the previous stored version is listed."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import store, twin
from farm.analysis import accuracy as A
from farm.errors import UnknownName
from farm.run.versions.venvs import key as version_key
from farm.store import accuracy as S


def context() -> dict[str, Any]:
    with store().session() as s:
        versions = sorted(S.versions(s), key=version_key)
        if not versions:
            return {"jax": None, "versions": [], "nothing": (
                "No accuracy table in this database. Measure one with `farm accuracy` "
                "(add --jax 0.9.2,0.10.2 for other versions).")}
        jax = request.args.get("jax", "").strip() or versions[-1]
        if jax not in versions:
            raise UnknownName("jax", jax, versions)
        rows = S.rows(s, jax)
        i = versions.index(jax)
        previous = versions[i - 1] if i else None
        moved = A.moved(S.rows(s, previous), rows) if previous else []
        primitive = request.args.get("primitive", "").strip() or None
        drill = None
        if primitive is not None:
            mine = [r for r in rows if r["primitive"] == primitive]
            if not mine:
                raise UnknownName("primitive", primitive, sorted({r["primitive"] for r in rows}))
            history = [{"jax": r["jax"], "dtype": r["dtype"], "platform": r["platform"], "max_ulp": r["max_ulp"]}
                       for r in S.rows(s) if r["primitive"] == primitive]
            drill = {"primitive": primitive, "rows": mine,
                     "history": sorted(history, key=lambda h: (h["dtype"], h["platform"], version_key(h["jax"])))}
    return {"jax": jax, "versions": versions, "nothing": None, "previous": previous, "moved": moved,
            "cells": A.cells(rows), "rows": rows if primitive is None else [], "drill": drill,
            "primitives": sorted({r["primitive"] for r in rows})}


def register(app: Flask) -> None:
    twin(app, "/accuracy", "/accuracy.json", "accuracy", "accuracy.html", context, params=("jax", "primitive"))
