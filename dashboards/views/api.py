"""The OpenAPI description of the JSON API (every page's ``.json`` twin and the one write)."""
from __future__ import annotations

from typing import Any

from flask import Flask, jsonify

FILTER_PARAMS = [{"name": n, "in": "query", "required": False, "schema": {"type": "string"},
                  "description": f"comma list of accepted {n} values"}
                 for n in ("primitive", "dtype", "platform", "status", "catalog")]
RUN = {"name": "run", "in": "query", "required": False, "schema": {"type": "string", "default": "latest"},
       "description": "run id, name, `latest` or `previous`"}
SHAPES = {"name": "shapes", "in": "query", "required": False,
          "schema": {"enum": ["both", "static", "symbolic"], "default": "both"},
          "description": "the records of static shapes, of the symbolic variant (farm sweep --shapes), or both"}
PAGE = {"name": "page", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1}}
FP = {"name": "fp", "in": "path", "required": True, "schema": {"type": "string"},
      "description": "harness fingerprint"}
ERR = {"description": "a FarmError", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _get(summary: str, params: list[dict[str, Any]], errors: tuple[int, ...] = (404,)) -> dict[str, Any]:
    return {"get": {"summary": summary, "parameters": params,
                    "responses": {"200": {"description": "the page's context as JSON (with an ETag and "
                                                         "Last-Modified while every run is finished)",
                                          "content": {"application/json": {"schema": {"type": "object"}}}},
                                  "304": {"description": "unchanged since the If-None-Match / If-Modified-Since"},
                                  "400": {**ERR, "description": "an unknown query parameter or value"},
                                  **{str(c): ERR for c in errors}}}}


def spec() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Lowering Farm dashboard", "version": "1",
                 "description": "Read-only JSON twins of the dashboard pages; writes need "
                                "`Authorization: Bearer $FARM_TOKEN`."},
        "paths": {
            "/overview.json": _get("primitive (or dtype) x platform matrix of a run, worst status per cell",
                                   [RUN, *FILTER_PARAMS, SHAPES, PAGE,
                                    {"name": "by", "in": "query", "schema": {"enum": ["primitive", "dtype"]}}]),
            "/runs.json": _get("runs, newest first, with environment, duration and totals", [PAGE], ()),
            "/trends.json": _get("per run (oldest first): wall time, throughput, results by outcome per platform "
                                 "and per stage, stage-time quantiles",
                                 [{"name": "runs", "in": "query", "schema": {"type": "integer", "minimum": 1,
                                                                              "maximum": 200, "default": 20},
                                   "description": "how many of the newest runs"}], ()),
            "/search.json": _get("harnesses whose name has every word of q (or whose primitive is one), in a run",
                                 [{"name": "q", "in": "query", "schema": {"type": "string", "maxLength": 200}},
                                  RUN, *[p for p in FILTER_PARAMS if p["name"] in ("status", "platform")],
                                  {"name": "sort", "in": "query", "schema": {
                                      "enum": ["name", "-name", "primitive", "-primitive", "dtype", "-dtype",
                                               "catalog", "-catalog"]}}, PAGE]),
            "/compare.json": _get("regression report between two runs",
                                  [{"name": "base", "in": "query", "schema": {"type": "string",
                                                                               "default": "previous"}},
                                   {"name": "head", "in": "query", "schema": {"type": "string",
                                                                               "default": "latest"}}]),
            "/harness/{fp}.json": _get("definition, every stage per platform, static against symbolic per "
                                       "platform, modules, artifacts, history", [FP, RUN, SHAPES]),
            "/harness/{fp}/module/{platform}.json": _get(
                "lowered module text for one platform",
                [FP, RUN, {"name": "platform", "in": "path", "required": True, "schema": {"type": "string"}}]),
            "/harness/{fp}/diff.json": _get(
                "unified diff of a platform's module text between two runs",
                [FP, {"name": "platform", "in": "query", "schema": {"type": "string", "default": "cpu"}},
                 {"name": "base", "in": "query", "schema": {"type": "string"}},
                 {"name": "head", "in": "query", "schema": {"type": "string"}}]),
            "/coverage.json": _get("primitive x dtype x platform coverage; stale limitations",
                                   [RUN, *FILTER_PARAMS]),
            "/boundary.json": _get("harnesses with non-StableHLO ops or unguaranteed custom calls",
                                   [RUN, *FILTER_PARAMS]),
            "/failures.json": _get("a run's failing records as clusters (one per cause), new ones first",
                                   [RUN, SHAPES]),
            "/artifacts/{sha}": {"get": {
                "summary": "an artifact's bytes, verified against its sha256",
                "parameters": [{"name": "sha", "in": "path", "required": True,
                                "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}],
                "responses": {"200": {"description": "the bytes",
                                      "content": {"application/octet-stream": {}, "text/plain": {}}},
                              "404": ERR, "500": {"description": "the stored bytes are corrupt"}}}},
            "/compare/accept": {"post": {
                "summary": "mark a status flip between two runs accepted",
                "security": [{"token": []}],
                "requestBody": {"required": True, "content": {"application/x-www-form-urlencoded": {"schema": {
                    "type": "object", "required": ["base", "head", "fingerprint", "platform", "stage"],
                    "properties": {k: {"type": "string"} for k in
                                   ("base", "head", "fingerprint", "platform", "stage", "note")}}}}},
                "responses": {"201": {"description": "accepted"}, "303": {"description": "back to the report"},
                              "400": ERR, "403": ERR, "404": ERR}}},
        },
        "components": {
            "schemas": {"Error": {"type": "object", "required": ["error", "status"],
                                  "properties": {"error": {"type": "string"}, "status": {"type": "integer"}}}},
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
        },
    }


def register(app: Flask) -> None:
    app.add_url_rule("/openapi.json", "openapi", lambda: jsonify(spec()), methods=["GET"])
