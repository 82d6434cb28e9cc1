"""What a results bundle (or a worker's journal) may contain, checked before anything is
stored: bundles cross a trust boundary (a device host writes them, another host imports
them), so every field the store writes is typed and bounded here, artifacts must hash to
their addresses, and every reference must resolve inside the bundle.

The JSON Schema is checked by ``fastjsonschema`` (compiled to Python once: ~20x faster than
``jsonschema`` on a 2,000-outcome bundle); a document it refuses is explained by
``jsonschema``'s best-matching error. Both are imported only when a bundle is read: the
device host that writes bundles never needs them.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from farm.errors import FarmError
from farm.results import STAGES, STATUSES

#: ``farm.store.models.ARTIFACT_KINDS`` (the device-host side may not import the store)
ARTIFACT_KINDS = ("export", "module", "io")


def _s(n: int, min_length: int = 0) -> dict[str, Any]:
    return {"type": "string", "maxLength": n, "minLength": min_length}


def _opt(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null (a type list, not ``anyOf``: ten times faster to check)."""
    return {**schema, "type": [schema["type"], "null"]}


_SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_STRINGS = {"type": "array", "items": _s(64)}
_ENVIRONMENT = {
    "type": "object",
    "required": ["jax_version", "jaxlib_version", "python", "host", "device_kinds", "xla_flags", "farm_commit"],
    "properties": {"jax_version": _s(32), "jaxlib_version": _s(32), "python": _s(32), "host": _s(255),
                   "device_kinds": _STRINGS, "xla_flags": _s(1000), "farm_commit": _s(64)},
}
_RUN = {
    "type": "object",
    "properties": {"name": _opt(_s(200, 1)), "catalog": _s(32), "filters": {"type": "object"},
                   "platforms": _STRINGS, "run_on": _STRINGS, "stats": _opt({"type": "object"})},
}
_HARNESS = {
    "type": "object",
    "required": ["fingerprint", "name", "catalog", "family", "primitive", "group", "dtype", "shapes", "params"],
    "properties": {"fingerprint": _s(64, 1), "name": _s(500), "catalog": _s(32), "family": _s(64),
                   "primitive": _s(128), "group": _s(128), "dtype": _s(16), "params": {"type": "object"}},
}
_NUMBER = {"type": "number"}
_RECORD = {
    "type": "object",
    "required": ["stage", "platform", "status"],
    "properties": {"stage": {"enum": list(STAGES)}, "platform": _s(64, 1), "status": {"enum": list(STATUSES)},
                   "seconds": _opt(_NUMBER), "error_type": _opt({"type": "string"}),
                   "error": _opt({"type": "string"}), "detail": _opt({"type": "string"}),
                   "metrics": _opt({"type": "object", "additionalProperties": _NUMBER}),
                   "facts": _opt({"type": "object"}), "artifact": _opt(_SHA)},
}
_ARTIFACT = {
    "type": "object",
    "required": ["sha256", "kind", "data"],
    "properties": {"sha256": _SHA, "kind": {"enum": list(ARTIFACT_KINDS)}, "data": {"type": "string"},
                   "meta": _opt({"type": "object", "properties": {"jax_version": _s(32)}})},
}
#: The jax code an outcome ran (``farm.cache.recorder.wire``): its set's address and the
#: rows it brings, each a part (``units``: file -> unit names) or a set (``parts``: addresses).
#: The store keeps only the rows that hash to their addresses (``farm.store.codedeps``).
_DEPS = {
    "type": "object",
    "required": ["set", "rows"],
    "additionalProperties": False,
    "properties": {"set": _SHA, "rows": {
        "type": "object", "maxProperties": 4096, "propertyNames": {"pattern": "^[0-9a-f]{64}$"},
        "additionalProperties": {
            "type": "object", "additionalProperties": False, "maxProperties": 1,
            "properties": {"parts": {"type": "array", "items": _SHA, "maxItems": 4096},
                           "units": {"type": "object", "maxProperties": 4096, "propertyNames": {"maxLength": 255},
                                     "additionalProperties": {"type": "array", "items": _s(255),
                                                              "maxItems": 20000}}}}}},
}
_OUTCOME = {
    "type": "object",
    "required": ["fingerprint", "name", "records", "artifacts"],
    "properties": {"fingerprint": _s(64, 1), "name": {"type": "string"}, "seconds": _opt(_NUMBER),
                   "worker": _opt({"type": "string"}), "result_key": _opt(_s(64)), "downstream_key": _opt(_s(64)),
                   "deps_key": _opt(_s(64)), "deps": _opt(_DEPS),
                   "records": {"type": "array", "items": _RECORD}, "artifacts": {"type": "array", "items": _ARTIFACT}},
}
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["environment", "run", "harnesses", "outcomes"],
    "properties": {"environment": _ENVIRONMENT, "run": _RUN, "harnesses": {"type": "array", "items": _HARNESS},
                   "outcomes": {"type": "array", "items": _OUTCOME}},
}


_VALIDATOR: list[Any] = []


def _validator() -> Any:
    import fastjsonschema  # deferred: only the importing host checks bundles

    if not _VALIDATOR:
        _VALIDATOR.append(fastjsonschema.compile(SCHEMA))
    return _VALIDATOR[0]


def _where(path: Any) -> str:
    return "/".join(str(p) for p in path) or "the document"


def validate(doc: Any, what: str) -> dict[str, Any]:
    """``doc`` checked against ``SCHEMA``, its artifacts decoded from base64 and verified against
    their addresses, its references checked; raises ``FarmError`` (one line) on the first problem."""
    import jsonschema  # deferred: only the importing host checks bundles

    try:
        _validator()(doc)
        err = None
    except Exception:  # noqa: BLE001 (fastjsonschema's refusal: explained below)
        err = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(SCHEMA).iter_errors(doc))
    if err is not None:
        raise FarmError(f"{what} is malformed at {_where(err.absolute_path)}: {err.message[:200]}")
    fps = {h["fingerprint"] for h in doc["harnesses"]}
    shas: set[str] = set()
    for i, o in enumerate(doc["outcomes"]):
        if o["fingerprint"] not in fps:
            raise FarmError(f"{what} is malformed at outcomes/{i}: harness {o['fingerprint'][:20]!r} is not among "
                            "the bundle's harnesses")
        for j, a in enumerate(o["artifacts"]):
            try:
                a["data"] = base64.b64decode(a["data"], validate=True)
            except (binascii.Error, ValueError):
                raise FarmError(f"{what} is malformed at outcomes/{i}/artifacts/{j}/data: not base64") from None
            actual = hashlib.sha256(a["data"]).hexdigest()
            if actual != a["sha256"]:
                raise FarmError(f"{what}: artifact {a['sha256'][:12]} (outcomes/{i}/artifacts/{j}) holds bytes that "
                                f"hash to {actual[:12]}: refused, nothing stored")
            shas.add(a["sha256"])
    for i, o in enumerate(doc["outcomes"]):
        for j, r in enumerate(o["records"]):
            if r.get("artifact") and r["artifact"] not in shas:
                raise FarmError(f"{what} is malformed at outcomes/{i}/records/{j}: artifact {r['artifact'][:12]} "
                                "is not in the bundle")
    return doc
