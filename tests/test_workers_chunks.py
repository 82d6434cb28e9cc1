"""What a worker actor streams (``workers.chunks``): outcomes in order, grouped by a time
window, never held back by a harness that is still running, and never reordered or lost
when one fails."""
from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import pytest

from farm.results import Outcome
from workers.chunks import decode, harness_thread, stream


def _jobs(*delays: float, fail_at: int | None = None) -> Any:
    """A producer of outcomes: job n's fingerprint is n, its name the thread it ran on; job n
    takes ``delays[n]`` seconds."""
    def produce() -> Iterator[Outcome]:
        for i, d in enumerate(delays):
            if i == fail_at:
                raise RuntimeError(f"job {i} broke")
            time.sleep(d)
            yield Outcome(str(i), str(threading.get_ident()), ())
    return produce


def _read(gen: Iterator[bytes]) -> list[tuple[float, list[int]]]:
    t0 = time.monotonic()
    return [(time.monotonic() - t0, [int(o.fingerprint) for o in decode(c)]) for c in gen]


def test_window_zero_sends_each_outcome_alone_as_soon_as_it_is_done() -> None:
    got = _read(stream(_jobs(0, 0, 0, 0), harness_thread(), window_s=0))
    assert [ids for _, ids in got] == [[0], [1], [2], [3]]


def test_outcomes_finished_within_the_window_travel_together_in_order() -> None:
    got = _read(stream(_jobs(0, 0, 0, 0, 0), harness_thread(), window_s=5.0, max_chunk=3))
    assert [ids for _, ids in got] == [[0, 1, 2], [3, 4]]  # at most max_chunk; the batch's end flushes


def test_a_running_job_does_not_hold_back_what_finished_before_it() -> None:
    # jobs 0-2 finish at once; job 3 takes 1.5 s: the first three leave when their window
    # (0.3 s) is over, not when job 3 is done
    got = _read(stream(_jobs(0, 0, 0, 1.5), harness_thread(), window_s=0.3))
    assert [ids for _, ids in got] == [[0, 1, 2], [3]]
    assert got[0][0] < 1.0 <= got[1][0]


def test_a_failing_producer_sends_what_finished_then_raises() -> None:
    gen = stream(_jobs(0, 0, 0, fail_at=2), harness_thread(), window_s=5.0)
    assert [int(o.fingerprint) for o in decode(next(gen))] == [0, 1]
    with pytest.raises(RuntimeError, match="job 2 broke"):
        next(gen)


def test_every_job_runs_on_the_one_harness_thread() -> None:
    thread = harness_thread()
    seen = {int(o.name) for _ in range(3) for c in stream(_jobs(0, 0), thread, window_s=0) for o in decode(c)}
    assert len(seen) == 1 and seen != {threading.get_ident()}


def test_a_reader_that_stops_stops_the_jobs_after_the_running_one() -> None:
    ran: list[int] = []

    def produce() -> Iterator[Outcome]:
        for i in range(50):
            time.sleep(0.02)
            ran.append(i)
            yield Outcome(str(i), "h", ())

    thread = harness_thread()
    gen = stream(produce, thread, window_s=0)
    next(gen)
    gen.close()
    thread.shutdown(wait=True)
    assert len(ran) < 50
