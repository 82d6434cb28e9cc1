"""App factory: a database URL, read-only by default, a token for writes."""
from __future__ import annotations

from typing import Any

from flask import Flask, jsonify

from farm.errors import FarmError
from farm.store import open_store


def create_app(db_url: str | None = None, token: str | None = None) -> Flask:
    app = Flask(__name__)
    app.config["STORE"] = open_store(db_url)
    app.config["WRITE_TOKEN"] = token
    from dashboards.views import overview

    overview.register(app)

    @app.errorhandler(FarmError)
    def _farm_error(e: FarmError) -> Any:
        return jsonify({"error": str(e)}), e.http_status

    return app
