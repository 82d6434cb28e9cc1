"""The minimizer's "same failure" test: two records fail the same way when their
signatures are equal.

The signature is ``farm.analysis.signatures`` (issue 27's triage clusters) where that
module is present; until then a local key: stage, status, error type and the message
with its numbers masked (so "3 of 400 elements" and "1 of 1 elements" agree, a
different error does not).
"""
from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def key(record: dict[str, Any]) -> tuple[str, ...] | None:
    """The local signature: None for a record that does not fail."""
    if record.get("status") in (None, "ok", "skipped", "not_runnable_here"):
        return None
    status = "fail" if record["status"] == "expected_fail" else record["status"]
    message = _NUMBER.sub("#", str(record.get("error") or ""))
    return (str(record.get("stage")), status, str(record.get("error_type")), message[:200])


def same_failure(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ka, kb = key(a), key(b)
    return ka is not None and ka == kb
