"""Standalone worker: the same stage code without Ray (jobs file in, results bundle out).

For hosts that cannot join the cluster (an air-gapped device host, a lent GPU machine
without Ray). Each harness runs in a child process so a crash or hang is recorded
(``crashed`` after one retry alone, ``timeout``) and the rest carry on.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import sys
import time
from typing import Any

from farm.pipeline import Outcome


def _child(conn: Any, catalog: str, modules: list[str], options: dict[str, Any]) -> None:
    from workers.runtime import JobRunner

    runner = JobRunner(catalog, modules, options)
    conn.send(("ready", runner.info()))
    while True:
        fp = conn.recv()
        if fp is None:
            return
        conn.send(("outcome", runner.run_one(fp)))


class IsolatedRunner:
    """A child process that runs harnesses one at a time; replaced when it dies or hangs."""

    def __init__(self, catalog: str, modules: list[str], options: dict[str, Any], startup_s: float = 180.0) -> None:
        self.args = (catalog, modules, options)
        self.startup_s = startup_s
        self.proc: Any = None
        self.conn: Any = None
        self.info: dict[str, Any] = {}

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(child, *self.args), daemon=True)
        self.proc.start()
        self.conn = parent
        if not parent.poll(self.startup_s):
            self.stop()
            raise RuntimeError("standalone worker did not start")
        _, self.info = parent.recv()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
            self.proc = None

    def run(self, fp: str, name: str, timeout_s: float) -> tuple[Outcome, bool]:
        """(outcome, worker died or hung)."""
        if self.proc is None:
            self.start()
        self.conn.send(fp)
        try:
            if self.conn.poll(timeout_s):
                _, d = self.conn.recv()
                return Outcome.from_dict(d), False
            self.stop()
            return Outcome.failed(fp, name, "timeout", f"no result after {timeout_s:.0f}s; worker killed"), True
        except (EOFError, OSError):
            code = self.proc.exitcode if self.proc else None
            self.stop()
            return Outcome.failed(fp, name, "crashed", f"worker process died (exit code {code})"), True


def run_jobs(jobs_path: str, out_path: str, log: Any = print) -> dict[str, Any]:
    """Run a jobs file and write a results bundle. Returns counts."""
    from farm import bundle, catalog

    with open(jobs_path) as f:
        jobs = json.load(f)
    hs = catalog.by_fingerprint(catalog.load(jobs["catalog"], jobs.get("modules", [])))
    fps = [fp for fp in jobs["fingerprints"] if fp in hs]
    missing = [fp for fp in jobs["fingerprints"] if fp not in hs]
    runner = IsolatedRunner(jobs["catalog"], jobs.get("modules", []), jobs["options"])
    runner.start()
    outcomes: list[Outcome] = []
    timeout = float(jobs.get("timeout_s", 120))
    t0 = time.monotonic()
    for i, fp in enumerate(fps):
        o, died = runner.run(fp, hs[fp].name, hs[fp].timeout_s or timeout)
        if died and o.worst == "crashed":
            o, _ = runner.run(fp, hs[fp].name, hs[fp].timeout_s or timeout)  # retried once alone
        outcomes.append(o)
        if (i + 1) % 50 == 0 or i + 1 == len(fps):
            log(f"[farm worker] {i + 1}/{len(fps)} harnesses, {time.monotonic() - t0:.0f}s", file=sys.stderr)
    env = runner.info.get("environment", {})
    runner.stop()
    bundle.write(out_path, environment=env,
                 run={"name": jobs.get("name"), "catalog": jobs["catalog"], "filters": jobs.get("filters", {}),
                      "platforms": jobs["options"].get("platforms", []),
                      "run_on": jobs["options"].get("run_on", [])},
                 harnesses=[hs[fp].describe() for fp in fps], outcomes=outcomes)
    return {"run": len(outcomes), "missing": len(missing)}
