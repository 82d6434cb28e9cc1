"""App factory: a database URL, read-only by default, a token for writes.

Every page is one module under ``views/`` with a template of the same name; the
same context renders as HTML or, at the page's ``.json`` twin, as JSON. A
``FarmError`` becomes its ``http_status`` with an error page (or a JSON body on
``.json`` and API routes); a database server that is down or restarting (or a SQLite
file locked past its busy timeout) is a 503 with one line and ``Retry-After``.
"""
from __future__ import annotations

import importlib
import os
from typing import Any

from flask import Flask, jsonify, render_template, request
from sqlalchemy.exc import DBAPIError
from werkzeug.exceptions import HTTPException

from dashboards.cache import PageCache
from farm.errors import FarmError
from farm.store import failures, open_store

#: The page modules (``dashboards.views.<page>``), in navigation order: each registers its routes.
PAGES = ("overview", "runs", "trends", "compare", "failures", "harness", "search", "coverage", "boundary", "features",
         "compositions", "pallas", "pallas_prims", "crosshost",
         "versions", "accuracy", "api")


def _wants_json() -> bool:
    p = request.path
    return p.endswith(".json") or p.startswith("/api/") or (
        request.accept_mimetypes.best == "application/json")


def create_app(db_url: str | None = None, token: str | None = None) -> Flask:
    """The dashboard for the database at ``db_url`` (default: $FARM_DB or sqlite:///farm.db).

    Args:
        db_url: a SQLAlchemy URL.
        token: the write token; ``None`` reads $FARM_TOKEN; no token at all means
            every write endpoint answers 403.
    """
    app = Flask(__name__)
    app.config["STORE"] = open_store(db_url)
    app.config["WRITE_TOKEN"] = token if token is not None else (os.environ.get("FARM_TOKEN") or None)
    app.config["JSON_SORT_KEYS"] = False
    app.json.sort_keys = False
    app.extensions["farm_page_cache"] = PageCache()  # pages over finished runs (dashboards.cache)

    from dashboards import views  # noqa: PLC0415  (the views import the store's reports: only create_app needs them)

    views.install(app)
    for name in PAGES:
        importlib.import_module(f"dashboards.views.{name}").register(app)

    def _error(status: int, title: str, message: str) -> Any:
        if _wants_json():
            return jsonify({"error": message, "status": status}), status
        return render_template("error.html", status=status, title=title, message=message), status

    @app.errorhandler(FarmError)
    def _farm_error(e: FarmError) -> Any:
        return _error(e.http_status, type(e).__name__, str(e))

    @app.errorhandler(HTTPException)
    def _http_error(e: HTTPException) -> Any:
        return _error(e.code or 500, e.name, e.description or e.name)

    @app.errorhandler(DBAPIError)
    def _database_unavailable(e: DBAPIError) -> Any:
        k = failures.kind(e)
        if k not in ("lost", "locked"):
            raise e  # a real bug: Flask's 500
        db = app.config["STORE"].engine.url.render_as_string(hide_password=True)
        what = ("cannot reach the database server" if k == "lost"
                else "the SQLite database is locked by another process")
        body, status = _error(503, "Service Unavailable", f"{what} ({db}); the page is shown again once it is back: "
                                                          "try again in a few seconds")
        resp = app.make_response((body, status))
        resp.headers["Retry-After"] = "5"
        return resp

    return app
