"""The one isolation policy every runner of jobs in worker processes applies: the Ray
scheduler (``farm.run.scheduler``) and the child-process runner (``farm.pipeline.child``)
that the standalone worker (``workers.standalone``), the fuzz probe and ``farm repro``'s
candidates and isolated runs use.

A job may take its own ``timeout_s`` or the runner's, plus ``startup_s`` while its process
is still starting (importing jax and the catalog): a Ray worker until its ``ready`` answers,
after which the job's clock restarts; the standalone runner waits for its child to start
before any clock runs. Past that its process is killed and the job is a ``timeout`` (not
retried: a hang would hang again). A process that dies
under a job is replaced and the job retried alone ``retries_alone`` times (the death may
have been another job's doing, or the machine's); then it is ``crashed``, which a
``Limitation.crashes`` makes the expected failure (``farm.judge.failures``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.judge import crashed, timed_out
from farm.results import Outcome


@dataclass(frozen=True, slots=True)
class Isolation:
    timeout_s: float = 120.0
    startup_s: float = 120.0
    retries_alone: int = 1

    def limit(self, job: Any, fresh: bool) -> float:
        """Seconds ``job`` may run (a harness or an artifact job: its ``timeout_s`` first)."""
        return (getattr(job, "timeout_s", None) or self.timeout_s) + (self.startup_s if fresh else 0.0)

    def retry(self, tries_alone: int) -> bool:
        """Whether a job whose process died, already retried alone ``tries_alone`` times, runs again."""
        return tries_alone < self.retries_alone

    def timed_out(self, job: Any, limit: float) -> Outcome:
        return timed_out(job.fingerprint, job.name, f"no result after {limit:.0f}s; worker killed")

    def crashed(self, job: Any, cause: str, run_on: tuple[str, ...], vjp: int = 0) -> Outcome:
        """The final outcome of a job whose process died every time, judged by its limitations."""
        return crashed(job, cause, run_on, vjp)
