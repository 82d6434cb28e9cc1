"""A job whose process died or hung: the ``crashed`` and ``timeout`` verdicts of every
runner of jobs in worker processes (the Ray scheduler and the standalone worker through
``farm.pipeline.isolation.Isolation``, fuzz probes, repro candidates, bisect steps).
A hang is a ``timeout`` (not retried: it would hang again); a death after its retries is
``crashed``, which a ``Limitation.crashes`` makes the expected failure."""
from __future__ import annotations

from typing import Any

from farm.judge.limitations import judge_crash
from farm.results import Outcome

#: The two verdicts on a process that gave no result.
CRASHED, TIMEOUT = "crashed", "timeout"


def lost(hung: bool) -> str:
    """The status of a job whose process hung (``timeout``) or died (``crashed``)."""
    return TIMEOUT if hung else CRASHED


def timed_out(fingerprint: str, name: str, why: str) -> Outcome:
    """The outcome of a job killed at its time limit."""
    return Outcome.failed(fingerprint, name, TIMEOUT, why)


def died(fingerprint: str, name: str, why: str) -> Outcome:
    """The outcome of a job whose process died under it (no limitation consulted)."""
    return Outcome.failed(fingerprint, name, CRASHED, why)


def crashed(job: Any, cause: str, run_on: tuple[str, ...], vjp: int = 0) -> Outcome:
    """The final outcome of a catalog job whose process died every time, judged by its
    limitations (``Limitation.crashes``: the expected failure; ``vjp``: the sweep's order)."""
    return judge_crash(job, died(job.fingerprint, job.name, f"worker process died: {cause}"), run_on, vjp)


def lost_record(stage: str, platform: str, *, hung: bool, why: str) -> dict[str, Any]:
    """A record, as a plain dict, of a job whose process hung or died (a repro candidate, a
    bisect step): the caller adds what it records besides."""
    return {"stage": stage, "platform": platform, "status": lost(hung), "error": why}
