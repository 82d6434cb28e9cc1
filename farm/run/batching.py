"""How many harnesses a free worker gets next (one batch, one Ray task): pure functions over
plain values, applied by ``farm.run.scheduler.Sweep``.

A batch costs the driver ~0.3 ms and a worker a round trip, so a fast worker gets many:
``batch_s`` seconds of its kind's measured pace (``FIRST_BATCH`` before any harness of the
kind was timed, an explicit ``batch`` or ``MAX_BATCH`` at most). Guided self-scheduling
bounds it by 1/workers of what is left, so the batches shrink at the end (to ``TAIL_S`` of
work, or one harness while nothing was timed) and every worker stays busy until the last;
nor does a batch run past the worker's recycling.

A kind's workers start together only when each has a first batch's worth of harnesses
(``first_workers``); a smaller sweep starts one, and adds another once the measured pace says
the harnesses left would keep it busy for longer than a worker takes to start (``grow``).
A worker's start (a Ray worker process, jax, the catalog, a warm-up harness) costs ~2.7 s of
a core: in the test suite, 35 of 125 workers had run at most two harnesses (docs/testing.md).

Example::

    pace = Pace()
    pace.chunk("cpu", n=40, seconds=2.0, fresh=False)  # 50 ms a harness
    batch_size(pace.of("cpu"), pending=1000, workers=10, room=1500, batch_s=2.0)  # 40
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: With no explicit ``batch``: a batch's size before any of its kind was timed, and the
#: most one holds. In between it is ``batch_s`` of the measured time a harness takes.
FIRST_BATCH, MAX_BATCH = 8, 256
#: The tail's batches are at least this many seconds of work (guided self-scheduling with a
#: minimum chunk): shrinking to one harness a task multiplies the tasks for a fast fleet
#: (486 against ~300 for 5,594 harnesses on 64 workers) to save at most this at the end.
TAIL_S = 0.25


def batch_size(pace: float | None, pending: int, workers: int, room: int, *, batch: int | None = None,
               batch_s: float = 1.0) -> int:
    """The size of the next batch of a kind.

    Args:
        pace: the worker seconds a harness of this kind takes (None: nothing timed yet).
        pending: the harnesses of this kind not handed out yet.
        workers: the workers this kind's harnesses are shared among.
        room: harnesses the worker may still run before it is recycled (may be 0 or less: at
            least one harness is always handed out).
        batch: an explicit cap (``SweepConfig.batch``), whatever the pace.
        batch_s: the seconds of work a batch holds when no cap is given.

    Returns:
        At least 1; at most ``pending`` when anything is pending.
    """
    if batch is not None:
        size = batch
    elif pace is not None:
        size = min(MAX_BATCH, int(batch_s / max(pace, 1e-6)))
    else:
        size = FIRST_BATCH
    left = pending // max(1, workers)  # guided self-scheduling: 1/workers of what is left
    if pace is not None:
        left = max(left, min(size, int(TAIL_S / max(pace, 1e-6))))  # but not under TAIL_S of work
    return max(1, min(size, left, pending, room))


#: The seconds a worker is taken to need to start before one of the sweep's own was timed.
START_S = 3.0


def first_workers(pending: int, workers: int) -> int:
    """How many of a kind's ``workers`` start at once: all when each gets a first batch
    (``FIRST_BATCH`` harnesses), else one; ``grow`` adds the others as they pay."""
    return workers if pending >= FIRST_BATCH * workers else 1


def grow(per: float | None, pending: int, live: int, start_s: float) -> bool:
    """Whether one more worker pays for its start: the harnesses not handed out yet, shared by
    the ``live`` workers, hold more than ``start_s`` seconds (a worker's measured start).

    Args:
        per: the seconds one harness takes, or a lower bound of it (the time a worker has
            spent on its current one); None: nothing known yet (every worker still starting).
    """
    return per is not None and pending > 0 and pending * per / max(1, live) > start_s


@dataclass
class Pace:
    """Per kind, the worker seconds one harness takes: a moving average over the chunks that
    workers stream (a new chunk weighs 0.2)."""

    seconds: dict[str, float] = field(default_factory=dict)

    def of(self, kind: str) -> float | None:
        return self.seconds.get(kind)

    def chunk(self, kind: str, n: int, seconds: float, *, fresh: bool) -> None:
        """``n`` outcomes came in one chunk, ``seconds`` after the worker's last chunk (or its
        batch began). A process's first chunk (``fresh``) is not counted: it holds the
        process's start-up."""
        if fresh:
            return
        per = seconds / n
        old = self.seconds.get(kind)
        self.seconds[kind] = per if old is None else 0.8 * old + 0.2 * per
