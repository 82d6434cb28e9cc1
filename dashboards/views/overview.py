"""Overview: the latest run's primitive x platform matrix, worst status per cell."""
from __future__ import annotations

from typing import Any

from flask import Flask, current_app, jsonify, render_template, request

from farm.store import queries


def context(run_ref: str = "latest") -> dict[str, Any]:
    store = current_app.config["STORE"]
    with store.session() as s:
        try:
            run = queries.resolve_run(s, run_ref)
        except Exception:
            return {"run": None, "matrix": {}, "platforms": []}
        m = queries.primitive_matrix(s, run.id)
        info = queries.run_dict(s, run)
    platforms = sorted({p for cells in m.values() for p in cells})
    return {"run": info, "matrix": m, "platforms": platforms}


def register(app: Flask) -> None:
    @app.get("/")
    def overview() -> str:
        return render_template("overview.html", **context(request.args.get("run", "latest")))

    @app.get("/overview.json")
    def overview_json() -> Any:
        return jsonify(context(request.args.get("run", "latest")))
