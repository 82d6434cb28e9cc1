"""``farm bench --only fleet``: the driver against a simulated fleet (``farm.bench.fleet``).

Figures: the driver's CPU time per harness with 64 replay actors (scheduler alone, the
median of 3 sweeps, against the 0.2 ms goal; and with the writes into SQLite); result rows
per second into SQLite and, with ``FARM_BENCH_PG`` (a PostgreSQL server URL whose database
may be created and dropped), into PostgreSQL; and the rows and bytes an unchanged re-sweep
stores (the same recorded run replayed twice: the second is a delta run).
"""
from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from farm.bench.figure import Figure
from farm.bench.fleet import Recorded, drive, start_actors, synthetic  # noqa: F401


def _sqlite_bytes(path: Path) -> tuple[int, int]:
    """(live page bytes, payload bytes) of a SQLite file. Pages in use exclude the freed pages
    of a compacted run; the payload (``dbstat``) is what the rows and index entries hold,
    without the part-empty room that deleting a run's index entries leaves inside pages."""
    import sqlite3

    with sqlite3.connect(path) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size, free = c.execute("PRAGMA page_size").fetchone()[0], c.execute("PRAGMA freelist_count").fetchone()[0]
        pages = (c.execute("PRAGMA page_count").fetchone()[0] - free) * size
        return pages, c.execute("SELECT sum(payload) FROM dbstat").fetchone()[0] or 0


def fleet_figures(quick: bool, log: Callable[[str], None], workers: int = 64, rate: float = 50.0) -> list[Figure]:
    import ray  # deferred: ray

    from farm.store import open_store

    n = 1500 if quick else 5594
    rec = synthetic(n)
    own = not ray.is_initialized()
    if own:
        ray.init(address="local", num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    figs: list[Figure] = []
    try:
        with tempfile.TemporaryDirectory() as d:
            log(f"bench: fleet of {workers} replay actors at {rate:g} outcomes/s each, {n} harnesses")
            url = f"sqlite:///{Path(d) / 'fleet.db'}"
            store = open_store(url)
            # the driver's overhead (scheduling, transport, decoding): the median of 3 sweeps
            bare = sorted(drive(store, rec, name=f"no-writes-{i}", workers=workers, rate=rate, write=False)
                          ["driver_ms_per_harness"] for i in range(1 if quick else 3))
            figs.append(Figure(f"driver CPU per harness, {workers} simulated workers, no writes",
                               bare[len(bare) // 2], "ms", 0.2,
                               spread=f"{len(bare)} sweeps: {bare[0]:.3f}-{bare[-1]:.3f}" if len(bare) > 1 else ""))
            b0 = _sqlite_bytes(Path(d) / "fleet.db")
            first = drive(store, rec, name="first", workers=workers, rate=rate)
            b1 = _sqlite_bytes(Path(d) / "fleet.db")
            second = drive(store, rec, name="again", workers=workers, rate=rate)
            b2 = _sqlite_bytes(Path(d) / "fleet.db")
            drive(store, rec, name="again-2", workers=workers, rate=rate)
            b3 = _sqlite_bytes(Path(d) / "fleet.db")

            def share(after: tuple[int, int], before: tuple[int, int], i: int) -> float:
                return 100.0 * max(0, after[i] - before[i]) / max(1, b1[i] - b0[i])

            # the same with the writes: ~19 rows a harness, so the store's cost (rows/s below), not a goal of its own
            figs += [Figure(f"driver CPU per harness, {workers} workers, writing SQLite",
                            first["driver_ms_per_harness"], "ms"),
                     Figure("result rows/s into SQLite (driver-bound)", first["rows_per_s"], "rows/s"),
                     Figure("unchanged re-sweep: rows stored vs a full run",
                            100.0 * second["delta"]["stored"] / max(1, first["harnesses"]), "%", 1.0),
                     Figure("unchanged re-sweep: bytes stored vs a full run (SQLite payload)", share(b2, b1, 1), "%", 1.0),
                     # the first delta run leaves room inside the index pages its deleted entries had
                     # split; later runs' entries land in that room (steady state: the second figure)
                     Figure("unchanged re-sweep: SQLite pages grown, first delta run", share(b2, b1, 0), "%"),
                     Figure("unchanged re-sweep: SQLite pages grown, next delta run", share(b3, b2, 0), "%")]
            store.dispose()
        pg = os.environ.get("FARM_BENCH_PG")
        if pg:
            import psycopg  # deferred: only with a PostgreSQL server

            name = f"farm_fleet_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(pg, autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{name}"')
            try:
                store = open_store(pg.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + "/" + name)
                r = drive(store, rec, name="pg", workers=workers, rate=rate)
                figs.append(Figure("result rows/s into PostgreSQL", r["rows_per_s"], "rows/s", 5000.0,
                                   better="higher"))
                store.dispose()
            finally:
                with psycopg.connect(pg, autocommit=True) as c:
                    c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        if own:
            ray.shutdown()
    return figs
