"""Static against symbolic shapes (``farm sweep --shapes static,symbolic``): which kind of
shape a record ran at, the scope triage gives a symbolic failure, and the per-platform
side by side the harness page shows.

A lowering rule wrong only with symbolic dimensions fails the symbolic stages while every
static stage of the harness passes; that is another problem (and another fix) than one
that breaks both, so triage keeps it apart and names it ("symbolic-only", "symbolic-only
on tpu") instead of letting it share a cluster with static failures of the same text.

Pure: plain rows in, plain values out.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from farm.results import BAD, LOWERING_PLATFORMS, SEVERITY, SHAPE_KINDS, SYMBOLIC_STAGES, STAGES

Row = Mapping[str, Any]
#: The dashboard's ``shapes`` filter: one kind of shape, or both (no filter).
SHAPE_FILTERS = (*SHAPE_KINDS, "both")
#: Record platforms that hold for every lowering platform: harness-wide (``any``) and the
#: multi-platform export (``export``: the four-platform export is one artifact).
WIDE = ("any", "export")
_ORDER = {s: i for i, s in enumerate(STAGES)}
_SIZE = re.compile(r"\b[a-z]\w*=\d+(,[a-z]\w*=\d+)*")


def kind_of(stage: str) -> str:
    """``symbolic`` for a stage of the symbolic variant, else ``static``."""
    return "symbolic" if stage in SYMBOLIC_STAGES else "static"


def keeps(stage: str, shapes: str) -> bool:
    """Whether the ``shapes`` filter (static | symbolic | both) shows a record of ``stage``."""
    return shapes == "both" or kind_of(stage) == shapes


def _harness(r: Row) -> tuple[Any, Any]:
    return r.get("run_id"), r.get("fingerprint") or r.get("harness")


def scopes(rows: Iterable[Row], expected: bool = False) -> dict[tuple[Any, Any], str]:
    """(run id, harness) -> the scope of its failing symbolic records, for the harnesses
    whose static records in that run have nothing wrong: ``symbolic-only``, or
    ``symbolic-only on P`` where the failing symbolic records name one lowering platform
    alone (the four-platform export's own record aside). ``rows``: every failing row of
    the runs (ok rows may be there too); ``expected``: ``expected_fail`` counts as failing."""
    failing = BAD + (("expected_fail",) if expected else ())
    static_bad: set[tuple[Any, Any]] = set()
    symbolic: dict[tuple[Any, Any], set[str]] = defaultdict(set)
    for r in rows:
        k = _harness(r)
        if kind_of(str(r.get("stage"))) == "static":
            if r.get("status") in BAD:
                static_bad.add(k)
        elif r.get("status") in failing:
            symbolic[k].add(str(r.get("platform")))
    out = {}
    for k, platforms in symbolic.items():
        if k in static_bad:
            continue
        own = sorted(p for p in platforms if p in LOWERING_PLATFORMS)
        out[k] = f"symbolic-only on {own[0]}" if len(own) == 1 else "symbolic-only"
    return out


def scope_of(row: Row, found: Mapping[tuple[Any, Any], str]) -> str:
    """The scope ``scopes`` gives ``row``'s harness, for a symbolic record ("" otherwise)."""
    return found.get(_harness(row), "") if kind_of(str(row.get("stage"))) == "symbolic" else ""


def failing_size(facts: Mapping[str, Any] | None, error: str | None = None) -> str | None:
    """The first point (``b=3,d4=5``: the sizes of the dimension variables) a call failed
    at: the first point in call order whose verdicts are not all ok, else the point after
    the last one reached (a call that raised), else the point its error names."""
    facts = facts or {}
    verdicts = facts.get("verdicts") or {}
    sizes = [str(n) for n in facts.get("sizes") or []]
    bad = [n for n, v in verdicts.items()
           if any(s not in ("ok", "skipped") and not str(s).startswith("undefined") for s in (v or {}).values())]
    if bad:
        return min(bad, key=lambda n: sizes.index(n) if n in sizes else len(sizes))
    reached = list(facts.get("reached") or [])
    if "reached" in facts and len(reached) < len(sizes):
        return sizes[len(reached)]
    m = _SIZE.search(error or "")
    return m.group(0) if m else None


def _worst(rows: list[Row]) -> Row | None:
    """The worst record (ties: the earliest stage)."""
    return max(rows, key=lambda r: (SEVERITY.get(r["status"], 0), -_ORDER.get(r["stage"], 99)), default=None)


def _side(r: Row | None) -> dict[str, Any] | None:
    if r is None:
        return None
    out = {"status": r["status"], "stage": r["stage"], "platform": r["platform"], "error_type": r.get("error_type"),
           "error": r.get("error")}
    if r["stage"] in SYMBOLIC_STAGES and r["status"] != "ok":
        out["size"] = failing_size(r.get("facts"), r.get("error"))
    return out


def side_by_side(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """Per lowering platform one harness's rows (of one run) have: the static verdict (the
    worst of its static records on that platform) beside the symbolic one (the worst of its
    symbolic records there), records of platform ``any`` or ``export`` counting for every
    platform (a failed four-platform export fails them all); each side names the record that
    decided it, its error and, for a symbolic failure, the size it failed at. Empty where the
    run has no symbolic record for the harness."""
    rows = list(rows)
    if not any(kind_of(r["stage"]) == "symbolic" for r in rows):
        return []
    out = []
    for p in LOWERING_PLATFORMS:
        here = [r for r in rows if r["platform"] in (p, *WIDE)]
        if not any(r["platform"] == p for r in here):
            continue
        static = _worst([r for r in here if kind_of(r["stage"]) == "static"])
        symbolic = _worst([r for r in here if kind_of(r["stage"]) == "symbolic"])
        out.append({"platform": p, "static": _side(static), "symbolic": _side(symbolic),
                    "differ": bool(static and symbolic and static["status"] != symbolic["status"])})
    return out
