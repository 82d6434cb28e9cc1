"""Helpers of the sweep fault cases: a ``farm sweep`` process, and the end state every case
must reach (``farm db check`` clean, the run finished, every harness's result exactly once)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from sqlalchemy import func, select

from farm.store import open_store, queries
from farm.store.models import OutcomeRow, ResultRow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NO_CACHE = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")
#: The suite's environment, JAX's compilation cache included: for a case where nothing is timed.
CACHED = {**os.environ, "PYTHONPATH": ROOT, "RAY_USAGE_STATS_ENABLED": "0"}
#: Without JAX's compilation cache (which `./dev test` turns on): a fault is injected while a sweep
#: runs, and with every compile cached the 52 harnesses took 4.6 s, done before a restart met them.
ENV = {k: v for k, v in CACHED.items() if k not in NO_CACHE}
#: a small selection that still takes a while: 52 harnesses, lowered for cpu and tpu
SMALL = ["--family", "elementwise_unary", "--dtype", "float32,int32", "--platforms", "cpu,tpu", "--workers", "2",
         "--batch", "2", "--repeats", "1"]
#: the whole family: 264 harnesses (about 30 s of work on 2 cores)
FAMILY = ["--family", "elementwise_unary", "--platforms", "cpu,tpu", "--workers", "2", "--batch", "2", "--repeats", "1"]


def farm(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**ENV, **(env or {})})


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "farm", *args], cwd=ROOT, env={**ENV, **(env or {})},
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def kill(p: subprocess.Popen) -> None:
    """SIGKILL the driver and everything it started (its Ray cluster too)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(60)
    p.stderr.close()


def outcomes(db: str, run: str | None = None) -> int:
    """Finished harnesses (of ``run``, else of every run); 0 while the database is not there yet."""
    try:
        store = open_store(db, upgrade=False)
        with store.session() as s:
            q = select(func.count()).select_from(OutcomeRow)
            if run is not None:
                q = q.where(OutcomeRow.run_id == queries.resolve_run(s, run).id)
            n = s.scalar(q) or 0
        store.dispose()
        return n
    except Exception:
        return 0


def wait_for(p: subprocess.Popen, db: str, n: int, timeout: float = 240) -> int:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = outcomes(db)
        if got >= n or p.poll() is not None:
            return got
        time.sleep(0.3)
    raise AssertionError(f"fewer than {n} results after {timeout:.0f}s")


def selected(args: list[str]) -> int:
    r = farm("catalog", *[a for a in args if a not in ("--workers", "--batch", "--repeats", "--platforms")
                          and not a.isdigit() and a != "cpu,tpu"], "--count")
    return int(r.stdout.split()[0].replace(",", ""))


def assert_intact(db: str, run: str, total: int, env: dict[str, str] | None = None) -> None:
    """The end state of every fault case."""
    r = farm("db", "check", "--db", db, env=env)
    assert r.returncode == 0 and "clean" in r.stdout, r.stdout + r.stderr
    store = open_store(db)
    with store.session() as s:
        row = queries.resolve_run(s, run)
        assert (row.status, row.total) == ("finished", total), (row.status, row.total, row.stats, r.stdout)
        hids = s.scalars(select(OutcomeRow.harness_id).where(OutcomeRow.run_id == row.id)).all()
        keys = s.execute(select(ResultRow.harness_id, ResultRow.platform, ResultRow.stage)
                         .where(ResultRow.run_id == row.id)).all()
    store.dispose()
    assert len(hids) == len(set(hids)) == total  # every harness exactly once: nothing lost, nothing doubled
    assert len(keys) == len(set(keys)) and {k[0] for k in keys} == set(hids)
