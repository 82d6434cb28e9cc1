"""What a worker actor streams to the driver: chunks of outcomes, not one object per harness.

Each object a Ray streaming generator yields costs the driver a report, a wait and a
deserialization (about 0.2 ms of its CPU on this host, more than everything the scheduler
itself does per harness). So the actor's jobs run on one harness thread and the generator
yields what has finished once the oldest unsent outcome is ``window_s`` old (or the batch
is over, or ``MAX_CHUNK`` are waiting): a fleet of fast workers sends a few objects a
second each, whatever their harness rate.

What the window costs, and why it stays sound:
- An outcome reaches the driver at most ``window_s`` late (a timeout's clock starts there).
- A harness that hangs without holding the GIL does not hold back what finished before it:
  the generator flushes on its own timer while the harness thread is stuck.
- A process that dies (or hangs holding the GIL) loses the outcomes of its open window.
  The driver cannot tell which harness did it, so it retries its current harness alone
  with ``window_s=0`` (one outcome per object, as precise as before) before recording a
  crash or a timeout (``farm.run.scheduler``); the rest of the batch is requeued.

Chunks travel as bytes made by the one outcome codec (``farm.formats.outcomes.pack``): Ray
passes bytes through without its own per-object pickling of each nested dict and buffer, and
the driver gets typed ``Outcome``s back.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from farm.formats.outcomes import pack, unpack
from farm.results import Outcome

#: The outcomes one chunk holds at most (a batch is smaller: the scheduler's ``batch``).
MAX_CHUNK = 64
#: The default window, seconds: how long a finished outcome may wait for others.
WINDOW_S = 0.2

_END = object()


def encode(outcomes: list[Outcome]) -> bytes:
    return pack(outcomes)


def decode(chunk: bytes) -> list[Outcome]:
    """The outcomes of one chunk, in the order their harnesses were given."""
    return unpack(chunk)


def harness_thread() -> ThreadPoolExecutor:
    """The one thread a worker runs all its jax work on (set-up and every job), so state jax
    keeps per thread (config contexts, the MLIR context) is the same for each harness."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness")


def stream(produce: Callable[[], Iterable[Outcome]], thread: ThreadPoolExecutor,
           window_s: float = WINDOW_S, max_chunk: int = MAX_CHUNK) -> Iterator[bytes]:
    """Run ``produce`` on ``thread``; yield its outcomes as encoded chunks, in order.

    ``window_s <= 0``: one outcome per chunk, each as soon as it is done. An exception in
    ``produce`` is raised here after the chunk before it is sent."""
    q: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def work() -> None:
        try:
            for o in produce():
                q.put(o)
                if stop.is_set():
                    break
        except BaseException as e:  # noqa: BLE001 - handed to the generator, which raises it
            q.put(e)
        q.put(_END)

    thread.submit(work)
    chunk: list[Outcome] = []
    due = 0.0
    try:
        while True:
            try:
                item = q.get(timeout=max(0.0, due - time.monotonic())) if chunk else q.get()
            except queue.Empty:  # the window is over and the next harness is still running
                yield encode(chunk)
                chunk = []
                continue
            if item is _END or isinstance(item, BaseException):
                if chunk:
                    yield encode(chunk)
                if item is _END:
                    return
                raise item
            if not chunk:
                due = time.monotonic() + window_s
            chunk.append(item)
            if window_s <= 0 or len(chunk) >= max_chunk:
                yield encode(chunk)
                chunk = []
    finally:
        stop.set()  # the driver stopped reading (the actor is being killed): do no more jobs
