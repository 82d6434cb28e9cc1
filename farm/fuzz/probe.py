"""One case at a time in an isolated process: what shrinking runs its candidates on.

The child imports jax once, plants ``FARM_PLANT`` faults like every worker, and runs each
case through ``run_harness`` (the same pipeline and options as the campaign's workers).
A case that kills the child is a ``crashed`` outcome and one that runs past the time limit
a ``timeout``; either way the next case gets a fresh child.
"""
from __future__ import annotations

import multiprocessing as mp
from typing import Any

from farm.catalog.cases import Case
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
            conn.send(run_harness(h, opts).to_dict())
        except Exception as e:  # the farm's own bug: an error outcome, as a worker records it
            conn.send(Outcome.failed(h.fingerprint, h.name, "error", f"farm error: {type(e).__name__}: {e}"[:500],
                                     stage="trace", error_type=type(e).__name__).to_dict())


class Probe:
    """A child process that runs cases; restarted after a crash or a timeout."""

    def __init__(self, options: Options, timeout_s: float = 60.0) -> None:
        self.options = options
        self.timeout_s = timeout_s
        self.proc: Any = None
        self.conn: Any = None
        self.runs = 0

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.options.to_dict()), daemon=True)
        self.proc.start()
        child.close()

    def run(self, case: Case, name: str, fingerprint: str) -> Outcome:
        """The case's outcome (``crashed`` or ``timeout`` when the child did not answer)."""
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.runs += 1
        self.conn.send(case.to_dict())
        # the first case also waits for the child to import jax
        limit = self.timeout_s + (60.0 if self.runs == 1 else 0.0)
        try:
            if self.conn.poll(limit):
                return Outcome.from_dict(self.conn.recv())
            status, why = "timeout", f"no result after {limit:.0f}s; probe killed"
        except (EOFError, OSError):
            status, why = "crashed", f"probe process died (exit {self.proc.exitcode})"
        self._kill()
        return Outcome.failed(fingerprint, name, status, why)

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
        self.proc = None
        self.runs = 0

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except OSError:
                pass
        self._kill()
