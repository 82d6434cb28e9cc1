"""How the scheduler cuts batches (one Ray task each): from the measured pace, shrinking at
the end, never past a worker's recycling; an explicit ``batch`` is a cap. No Ray here: the
scheduler's sizing is driven directly (the sweeps in test_sweep.py run it for real; the policy's
rules one by one: test_run_batching.py)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import pytest

from farm.results import Options
from farm.run.cluster import Worker
from farm.run.progress import SweepConfig
from farm.run.batching import FIRST_BATCH, MAX_BATCH, TAIL_S
from farm.run.scheduler import Sweep


@dataclass(frozen=True)
class H:
    fingerprint: str
    name: str
    family: str = "f"
    group: str = "g"
    dtype: str = "float32"


def sweep(n: int, workers: int, **cfg: object) -> Sweep:
    hs = [H(f"fp{i}", f"h{i}") for i in range(n)]
    sw = Sweep(hs, Options(), "farm", SweepConfig(workers=workers, progress=False, **cfg), lambda o, w: None)  # type: ignore[arg-type]
    sw.pending["cpu"] = deque(hs)
    sw.target["cpu"] = workers
    return sw


def grown(monkeypatch: pytest.MonkeyPatch, n: int, *, pace: float | None = None, busy_s: float | None = None,
          up_s: float | None = 1.0, want: int = 1, target: int = 2, capacity: int = 2) -> Sweep:
    """A sweep of ``n`` pending harnesses with ``want`` workers running (each ``busy_s`` into its
    current harness; None: still starting), after one ``_grow``; new workers are plain records."""
    sw = sweep(n, target)
    sw.want["cpu"] = want
    now = 1000.0
    sw.slots = [Worker(None, stream=object(), fresh=busy_s is None, since=now - (busy_s or 0.0), up_s=up_s)
                for _ in range(want)]
    if pace is not None:
        sw.pace.seconds["cpu"] = pace
    monkeypatch.setattr(sw, "_new_worker", lambda kind: Worker(None, kind=kind))
    monkeypatch.setattr("farm.run.scheduler.cluster.capacity", lambda kind, fraction: capacity)
    sw._grow(now)
    return sw


def test_a_small_sweep_grows_a_worker_once_the_time_a_harness_takes_shows_it_pays(monkeypatch) -> None:  # noqa: ANN001
    sw = grown(monkeypatch, 6, busy_s=2.0)  # 2 s into one harness, 6 more pending: 12 s > a 1 s start
    assert sw.want["cpu"] == 2 and len(sw.slots) == 2
    sw._grow(1000.0)  # at its target: no more
    assert len(sw.slots) == 2


@pytest.mark.parametrize("case", [
    dict(busy_s=None),  # every worker still starting: nothing known
    dict(pace=0.01, busy_s=0.01),  # 60 ms of work left
    dict(busy_s=0.1, up_s=5.0),  # 0.6 s left at least, and a worker takes 5 s to start
    dict(busy_s=2.0, capacity=1),  # the cluster has no slot for it
    dict(busy_s=2.0, want=2),  # all started already
    dict(busy_s=0.3, up_s=None, pace=0.4),  # 2.4 s left, under the 3 s a start is taken to cost (START_S)
])
def test_no_worker_is_added_where_it_would_not_pay_or_fit(monkeypatch, case) -> None:  # noqa: ANN001
    sw = grown(monkeypatch, 6, **case)
    assert len(sw.slots) == sw.want["cpu"] == case.get("want", 1)


def test_untimed_batches_are_small_then_they_hold_batch_s_of_the_measured_pace() -> None:
    sw = sweep(100_000, 4, batch_s=2.0)
    w = Worker(None)
    assert sw._batch_size(w) == FIRST_BATCH  # nothing timed yet: a harness may take minutes
    sw.pace.seconds["cpu"] = 0.05
    assert sw._batch_size(w) == 40  # 2 s of 50 ms harnesses
    sw.pace.seconds["cpu"] = 1e-5
    assert sw._batch_size(w) == MAX_BATCH
    sw.pace.seconds["cpu"] = 30.0  # slow harnesses: one a task
    assert sw._batch_size(w) == 1


def test_an_explicit_batch_is_a_cap_whatever_the_pace() -> None:
    sw = sweep(100_000, 4, batch=2)
    sw.pace.seconds["cpu"] = 0.001
    assert sw._batch_size(Worker(None)) == 2


def test_the_tail_shrinks_to_tail_s_of_work_and_never_past_what_is_left() -> None:
    sw = sweep(1000, 10, batch_s=2.0)
    w = Worker(None)
    sw.pace.seconds["cpu"] = 0.05
    assert sw._batch_size(w) == 40  # 1000/10 left per worker: the pace's 40 rules
    for _ in range(800):
        sw.pending["cpu"].popleft()
    assert sw._batch_size(w) == 20  # guided self-scheduling: 1/workers of what is left
    while len(sw.pending["cpu"]) > 3:
        sw.pending["cpu"].popleft()
    assert sw._batch_size(w) == 3  # at least TAIL_S of work (5), but only 3 are left
    sw.pending["cpu"].extend(H(f"x{i}", "x") for i in range(20))
    assert sw._batch_size(w) == int(TAIL_S / 0.05)  # 23 left: 2 each by 1/workers, 5 by the tail rule


def test_a_batch_ends_where_its_worker_is_recycled() -> None:
    sw = sweep(100_000, 2, recycle_after=100)
    sw.pace.seconds["cpu"] = 0.001
    w = Worker(None, count=97)
    assert sw._batch_size(w) == 3
    w.count = 100  # already due (recycled at its batch's end): one more at most
    assert sw._batch_size(w) == 1


@pytest.mark.parametrize("fresh", [True, False])
def test_the_pace_is_the_time_between_chunks_and_a_starting_process_is_not_timed(fresh: bool) -> None:
    sw = sweep(10, 1)
    w = Worker(None, fresh=fresh, since=100.0)
    sw._timed(w, 4, 102.0)
    assert sw.pace.of("cpu") == (None if fresh else 0.5)
    if not fresh:
        sw._timed(w, 1, 102.0 + 0.5 * 6)  # a slower chunk moves the average part way
        assert 0.5 < sw.pace.seconds["cpu"] < 3.0
