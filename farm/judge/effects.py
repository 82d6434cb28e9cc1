"""The verdict on what an effects harness's artifacts did (``farm.stages.effects``): the
lines printed, what the callbacks received and in which order, and the branch each
artifact took, against the harness's ``Effects``.

Exact comparison: the values pass through callbacks and prints untouched (float32 in,
float32 out), and a branch adds a small integer, so any difference is a wrong effect, not
rounding.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from farm.catalog import Effects, Harness
from farm.results import Record


def effects(h: Harness, rec: Record) -> Record:
    """``rec`` as ``fail`` where any artifact's effects differ from ``h.effects``; a record
    that did not run (error, not runnable here) stands as it is."""
    if rec.status != "ok" or h.effects is None:
        return rec
    wrong: list[str] = []
    for name, seen in (rec.facts.get("observed") or {}).items():
        wrong += [f"{name}: {w}" for w in mismatches(h.effects, seen)]
    if not wrong:
        return rec
    return rec.with_status("fail", error_type="EffectsMismatch", error="; ".join(wrong)[:1000],
                           facts={**rec.facts, "mismatches": wrong})


def mismatches(want: Effects, seen: Mapping[str, Any]) -> list[str]:
    """What one artifact's run did that ``want`` does not say (empty: all as expected)."""
    out: list[str] = []
    printed = list(seen.get("printed") or [])
    if not _same(printed, list(want.printed), want.ordered):
        out.append(f"printed {printed} where {list(want.printed)} was expected")
    calls = [(str(tag), tuple(float(v) for v in vals)) for tag, vals in seen.get("calls") or []]
    expected = [(tag, tuple(vals)) for tag, vals in want.calls]
    if not _same(calls, expected, want.ordered):
        order = "in this order" if want.ordered else "in any order"
        out.append(f"callbacks received {_show(calls)} where {_show(expected)} was expected ({order})")
    branch = seen.get("branch")
    if want.branches and branch in want.branches:
        got = tuple(v for o in seen.get("outputs") or [] for v in o)
        if got != tuple(want.branches[branch]):
            took = [p for p, vals in want.branches.items() if tuple(vals) == got]
            out.append(f"returned {list(got)}, the {took[0] if took else 'no'} branch, where {branch}'s "
                       f"{list(want.branches[branch])} was expected")
    return out


def _same(got: Sequence[Any], want: Sequence[Any], ordered: bool) -> bool:
    return list(got) == list(want) if ordered else sorted(got) == sorted(want)


def _show(calls: Sequence[tuple[str, tuple[float, ...]]]) -> str:
    return "[" + ", ".join(f"{tag}{list(vals)}" for tag, vals in calls) + "]"
