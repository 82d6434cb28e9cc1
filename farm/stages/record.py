"""Helpers every stage uses to make its record: a failure from an exception, a timer.

The vocabulary itself (statuses, stages, ``Record``) is the contract in ``farm.results``."""
from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from farm.results import BAD, SEVERITY, STAGES, STATUSES, Record  # noqa: F401  (stages build Records)

def failure(cls: type[Record], stage: str, platform: str, exc: BaseException, seconds: float,
            **kw: Any) -> Record:
    """A record for a stage that raised: type, first line, and the full text."""
    msg = str(exc).strip()
    first = msg.splitlines()[0][:500] if msg else type(exc).__name__
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-20000:]
    return cls(stage=stage, platform=platform, status="error", seconds=seconds,
               error_type=type(exc).__name__, error=first, detail=detail, **kw)


class Timer:
    """Wall time of a block, in seconds."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def __call__(self) -> Iterator["Timer"]:
        t0 = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds = time.perf_counter() - t0
