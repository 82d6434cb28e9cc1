"""Shrinking a failure with hypothesis, replayed from the campaign's seed.

The campaign drew round ``r`` with hypothesis seed ``round_seed(seed, r)``; running that
round again with the same seed draws the same cases in the same order. The test function
answers from the campaign's outcomes (no case runs twice) until it meets a case with the
target signature, which it fails; hypothesis then shrinks, and every smaller candidate it
tries runs in the ``Probe`` (an isolated process). A candidate fails only if it shows the
*same* signature, so shrinking never slides to another bug. ``max_runs`` bounds the
candidates actually run; past it every new candidate passes and hypothesis stops.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase
from hypothesis import strategies as st

from farm.analysis.signatures import Signature, signature
from farm.catalog.cases import Case
from farm.fuzz.generate import run_round
from farm.results import Outcome


def signatures(o: Outcome, primitive: str) -> dict[str, Signature]:
    """Each failing record's signature, by key (the triage clusters' keys)."""
    out: dict[str, Signature] = {}
    for r in o.records:
        s = signature(r.to_dict(), primitives=[primitive])
        if s is not None:
            out[s.key] = s
    return out


class Found(AssertionError):
    """The test function's failure: the case shows the target signature."""


@dataclass
class Shrunk:
    """The smallest case hypothesis found with the target signature (None: not reproduced)."""

    case: Case | None
    runs: int = 0  # candidates actually run
    tried: int = 0  # candidates hypothesis drew (the rest answered from the campaign or past the cap)
    steps: list[Case] = field(default_factory=list)  # each smaller failing case, in order


def shrink(strategy: st.SearchStrategy[Case], seed: int, r: int, examples: int, target: str,
           known: dict[str, Outcome], run: Callable[[Case], Outcome], key: Callable[[Case], str], *,
           max_runs: int = 40, database: Any = None) -> Shrunk:
    """Replay round ``r`` and shrink the first case whose outcome has signature ``target``.

    ``known``: fingerprint -> outcome, the campaign's (grown with every candidate run);
    ``run``: runs a candidate; ``key``: a case's fingerprint."""
    res = Shrunk(None)

    def test(case: Case) -> None:
        res.tried += 1
        fp = key(case)
        o = known.get(fp)
        if o is None:
            if res.runs >= max_runs:
                return
            res.runs += 1
            o = known[fp] = run(case)
        if target in signatures(o, case.primitive):
            res.steps.append(case)
            raise Found(target)

    try:
        run_round(strategy, seed, r, examples, test, phases=(Phase.generate, Phase.shrink), database=database)
    except Found:
        pass
    res.case = res.steps[-1] if res.steps else None  # hypothesis replays the minimal example last
    return res


def size(case: Case) -> tuple[int, ...]:
    """How big a case is, for choosing the smallest of several: elements, then rank."""
    import math

    return (sum(math.prod(s) for s in case.shapes), sum(len(s) for s in case.shapes))


def smallest(cases: Iterable[Case]) -> Case | None:
    return min(cases, key=size, default=None)
