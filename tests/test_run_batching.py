"""farm.run.batching: the batch policy, one rule a test, over plain values (no Sweep, no Ray)."""
from __future__ import annotations

import pytest

from farm.run.batching import FIRST_BATCH, MAX_BATCH, TAIL_S, Pace, batch_size, first_workers, grow

BIG = 1_000_000  # pending or room that bounds nothing


def test_nothing_timed_gives_the_first_batch() -> None:
    assert batch_size(None, BIG, 1, BIG) == FIRST_BATCH


@pytest.mark.parametrize("pace, batch_s, size", [(0.05, 1.0, 20), (0.05, 2.0, 40), (0.001, 0.1, 100)])
def test_a_timed_batch_holds_batch_s_of_the_pace(pace: float, batch_s: float, size: int) -> None:
    assert batch_size(pace, BIG, 1, BIG, batch_s=batch_s) == size


def test_a_fast_pace_is_capped_at_max_batch_and_a_slow_one_gives_one() -> None:
    assert batch_size(1e-5, BIG, 1, BIG) == MAX_BATCH
    assert batch_size(0.0, BIG, 1, BIG) == MAX_BATCH  # a pace of zero divides by nothing
    assert batch_size(30.0, BIG, 1, BIG) == 1


@pytest.mark.parametrize("pace", [None, 0.001, 30.0])
def test_an_explicit_batch_is_the_size_whatever_the_pace(pace: float | None) -> None:
    assert batch_size(pace, BIG, 1, BIG, batch=3) == 3


def test_guided_self_scheduling_gives_one_worker_its_share_of_what_is_left() -> None:
    assert batch_size(0.01, 1000, 20, BIG) == 50  # 1 s is 100, TAIL_S 25: 1/20 of 1000 rules
    assert batch_size(None, 40, 10, BIG) == 4  # untimed too
    assert batch_size(None, 5, 10, BIG) == 1  # untimed: down to one harness
    assert batch_size(0.001, 200, 0, BIG) == 200  # no workers counted: as one


def test_the_tail_is_not_under_tail_s_of_work() -> None:
    pace = 0.01  # TAIL_S is 25 harnesses
    assert batch_size(pace, 100, 10, BIG) == int(TAIL_S / pace)  # 1/10 would be 10
    assert batch_size(pace, 3, 10, BIG) == 3  # but never more than is left
    assert batch_size(0.05, 100, 10, BIG, batch_s=0.1) == 2  # nor more than batch_s of work


def test_a_batch_never_runs_past_the_worker_recycling() -> None:
    assert batch_size(0.001, BIG, 1, 3) == 3
    assert batch_size(0.001, BIG, 1, 0) == 1  # already due: one more at most
    assert batch_size(0.001, BIG, 1, -5) == 1


def test_there_is_always_at_least_one() -> None:
    assert batch_size(None, 0, 4, BIG) == 1


def test_the_pace_skips_a_fresh_process_and_averages_the_rest() -> None:
    pace = Pace()
    pace.chunk("cpu", 4, 2.0, fresh=True)  # start-up inside: not counted
    assert pace.of("cpu") is None
    pace.chunk("cpu", 4, 2.0, fresh=False)
    assert pace.of("cpu") == 0.5  # the first timed chunk is the pace
    pace.chunk("cpu", 1, 3.0, fresh=False)
    assert pace.of("cpu") == pytest.approx(0.8 * 0.5 + 0.2 * 3.0)  # then a moving average
    assert pace.of("gpu") is None  # per kind


def test_workers_start_together_only_when_each_has_a_first_batch() -> None:
    assert first_workers(2 * FIRST_BATCH, 2) == 2
    assert first_workers(2 * FIRST_BATCH - 1, 2) == 1  # a small sweep: one, the other by grow
    assert first_workers(3, 1) == 1
    assert first_workers(10_000, 64) == 64


def test_one_more_worker_only_while_what_is_left_outlasts_its_start() -> None:
    assert grow(None, 100, 1, 3.0) is False  # nothing known yet: every worker is still starting
    assert grow(0.5, 7, 1, 3.0) is True  # 3.5 s of work left for one worker
    assert grow(0.5, 6, 1, 3.0) is False  # 3 s: a new worker would start only to find it done
    assert grow(0.5, 13, 2, 3.0) is True and grow(0.5, 12, 2, 3.0) is False  # shared by the live ones
    assert grow(60.0, 0, 1, 3.0) is False  # nothing pending: a slow harness under way is not shared
    assert grow(0.5, 7, 1, 10.0) is False  # a slow start (a loaded host) raises the bar
