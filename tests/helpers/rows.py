"""Hand-written store rows: an environment, harness descriptions and outcomes with an artifact."""
from __future__ import annotations

import hashlib

from farm.results import Artifact, Outcome, Record

ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "test",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}


def harness_desc(i: int) -> dict:
    return {"fingerprint": f"fp{i:04d}", "name": f"h{i}", "catalog": "farm", "family": "fam", "primitive": "sin",
            "group": "sin", "dtype": "float32", "shapes": [[3]], "params": {}}


def outcome(i: int, status: str = "ok", blob: bytes = b"module text") -> Outcome:
    sha = hashlib.sha256(blob).hexdigest()
    return Outcome(f"fp{i:04d}", f"h{i}", [
        Record("trace", "any", "ok", 0.001),
        Record("compare", "cpu", status, 0.0, metrics={"max_abs_err": float("inf") if status == "fail" else 0.0}),
        Record("serialize", "export", "ok", artifact=sha)], [Artifact(sha, "export", blob, {"jax_version": "0.9"})])
