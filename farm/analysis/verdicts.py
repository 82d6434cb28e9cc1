"""Which harnesses of a run got an independent numeric verdict, from its compare records
(pure). The same shape as ``farm.reference.coverage`` (what the catalog will get), built
from what a sweep recorded: per group, how many harnesses were judged against a
reference, by an invariant, or not at all, and why not.

A harness counts once, by its best verdict over the platforms it ran on; one with no
compare record (it did not run here, or failed before executing) is ``none`` with the
reason "not executed".
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from farm.results import ERRORS, verdict_table

#: what a compare record's ``facts.against`` says -> verdict kind
KIND_OF_AGAINST = {"jaxpr": "reference", "reference": "reference", "invariant": "invariant", "none": "none",
                   "native": None, "export": None}
_RANK = {"reference": 0, "invariant": 1, "none": 2}


def kind(record: dict[str, Any]) -> tuple[str, str | None]:
    """(reference | invariant | none, reason for none) of one compare record."""
    facts = record.get("facts") or {}
    k = KIND_OF_AGAINST.get(facts.get("against"), "none")
    if record["status"] == "skipped" or k == "none":
        return "none", facts.get("reason") or record.get("error") or "skipped"
    if record["status"] in ERRORS:
        return "none", f"compare {record['status']}: {record.get('error_type') or record.get('error') or ''}".strip()
    return k or "none", None


def from_records(harnesses: Iterable[dict[str, Any]], records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``harnesses``: ``{"harness", "group"}`` of every harness of the run; ``records``:
    its compare-stage records (``harness``, ``platform``, ``status``, ``error``, ``facts``).
    Only native compares count (not a deserialized artifact's run)."""
    best: dict[str, tuple[str, str | None]] = {}
    for r in records:
        k = KIND_OF_AGAINST.get((r.get("facts") or {}).get("against"), "none")
        if k is None:
            continue  # the export round trip: the artifact against the native run
        v = kind(r)
        old = best.get(r["harness"])
        if old is None or _RANK[v[0]] < _RANK[old[0]]:
            best[r["harness"]] = v
    return verdict_table((h["group"], *best.get(h["harness"], ("none", "not executed"))) for h in harnesses)
