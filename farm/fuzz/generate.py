"""The campaign's cases: drawn by hypothesis from one seed, in rounds, the same on every run.

Round ``r`` is one hypothesis run of ``per_round`` examples seeded with ``(seed, r)``; the
test function only collects what it is given. Shrinking replays a round with the same seed
(``farm.fuzz.shrink``), so the case that failed is drawn again at the same place.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st

from farm.catalog.cases import Case


def round_seed(seed: int, r: int) -> int:
    """Round ``r``'s hypothesis seed (round 0 is the campaign's seed itself)."""
    return seed if r == 0 else (seed * 1_000_003 + r) % (2**63)


def run_round(strategy: st.SearchStrategy[Case], seed: int, r: int, examples: int,
              test: Callable[[Case], Any], *, phases: tuple[Phase, ...] = (Phase.generate,),
              database: Any = None) -> None:
    """One hypothesis run of round ``r``: ``test`` called on every case drawn."""
    @settings(max_examples=examples, database=database, phases=phases, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)
    @hseed(round_seed(seed, r))
    @given(strategy)
    def fuzz_round(case: Case) -> None:
        test(case)

    fuzz_round()


def draw_round(strategy: st.SearchStrategy[Case], seed: int, r: int, examples: int) -> list[Case]:
    """The cases round ``r`` draws, in order (duplicates included: hypothesis may repeat one)."""
    out: list[Case] = []
    run_round(strategy, seed, r, examples, out.append)
    return out
