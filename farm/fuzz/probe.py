"""One case at a time in an isolated process: what shrinking runs its candidates on.

The child imports jax once, plants ``FARM_PLANT`` faults like every worker, and runs each
case through ``run_harness`` (the same pipeline and options as the campaign's workers).
A case that kills the child is a ``crashed`` outcome and one that runs past the time limit
a ``timeout``; either way the next case gets a fresh child.
"""
from __future__ import annotations

from typing import Any

from farm.catalog.cases import Case
from farm.formats.outcomes import pack, unpack
from farm.judge import died, timed_out
from farm.pipeline.child import TIMED_OUT, Child, Ended
from farm.pipeline.isolation import Isolation
from farm.results import Options, Outcome


def _serve(conn: Any, options: dict[str, Any]) -> None:  # the child
    from workers.runtime import configure_process

    configure_process()
    from farm.fuzz.worker_catalog import define
    from farm.pipeline import run_harness
    from farm.faults import plant_from_env

    plant_from_env()
    opts = Options.from_dict(options)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        h = define(Case.from_dict(msg))
        try:
            conn.send(pack([run_harness(h, opts)]))
        except Exception as e:  # the farm's own bug: an error outcome, as a worker records it
            conn.send(pack([Outcome.failed(h.fingerprint, h.name, "error", f"farm error: {type(e).__name__}: {e}"[:500],
                                           stage="trace", error_type=type(e).__name__)]))


def _lost(ended: Ended, name: str, fingerprint: str) -> Outcome:
    """The outcome of a case whose child did not answer: ``timeout`` or ``crashed``."""
    if ended.how == TIMED_OUT:
        return timed_out(fingerprint, name, f"no result after {ended.limit_s:.0f}s; probe killed")
    return died(fingerprint, name, f"probe process died (exit {ended.exitcode})")


class Probe:
    """A child process that runs cases; restarted after a crash or a timeout."""

    def __init__(self, options: Options, timeout_s: float = 60.0) -> None:
        self.options = options
        self.timeout_s = timeout_s
        # the first case of a child also waits for it to import jax
        self.child = Child(_serve, (options.to_dict(),), Isolation(timeout_s, startup_s=60.0), what="fuzz probe")

    def run(self, case: Case, name: str, fingerprint: str) -> Outcome:
        """The case's outcome (``crashed`` or ``timeout`` when the child did not answer)."""
        ended = self.child.ask(case.to_dict())
        return unpack(ended.output)[0] if ended.finished else _lost(ended, name, fingerprint)

    def close(self) -> None:
        self.child.stop(grace_s=5.0)
