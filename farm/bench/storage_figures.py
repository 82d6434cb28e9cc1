"""``farm bench --only storage``: what unchanged nightlies cost a SQLite store on disk.

One fresh sweep of a small selection of the farm catalog, then ``nightlies`` unchanged
re-sweeps (each served whole by the result cache, written as a real sweep writes: the
first re-sweep in full, the later ones as delta runs), the file's size after each
(``PRAGMA page_count`` after a WAL checkpoint: the file as it lies on disk, freed pages
included). Then what ``farm db prune --keep 7`` and ``VACUUM`` give back. Sizes are
given against the bytes one run added to the empty database. Not in the quick default
(``farm bench --only storage``): 30 re-sweeps take minutes.
"""
from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from farm.bench.figure import Figure

#: How many runs ``farm db prune`` keeps in the figure
KEEP = 7


def file_pages(path: Path) -> tuple[int, int]:
    """(file bytes, free-page bytes) of a SQLite database, its WAL checkpointed into it."""
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = c.execute("PRAGMA page_size").fetchone()[0]
        return (c.execute("PRAGMA page_count").fetchone()[0] * size,
                c.execute("PRAGMA freelist_count").fetchone()[0] * size)


def storage_figures(quick: bool, log: Callable[[str], None], nightlies: int = 30,
                    harnesses: int | None = None) -> list[Figure]:
    from farm import catalog  # deferred: the catalog registry
    from farm.results import Options
    from farm.run.sweep import SweepConfig, sweep  # deferred: the sweep (ray, jax)
    from farm.store import open_store, prune

    n = harnesses or (20 if quick else 60)
    chosen = catalog.select(catalog.Filters(catalog="farm", family=("elementwise_unary",)))[:n]
    log(f"bench: storage: 1 sweep of {len(chosen)} harnesses, then {nightlies} unchanged re-sweeps (SQLite)")
    figs: list[Figure] = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "nightly.db"
        store = open_store(f"sqlite:///{path}")
        sizes = [file_pages(path)]
        try:
            for i in range(nightlies + 1):
                sweep(store, chosen, options=Options(), catalog="farm", filters={},
                      config=SweepConfig(workers=1, progress=False), name=f"nightly-{i}", force=i == 0,
                      log=lambda s: None)
                sizes.append(file_pages(path))
                log(f"bench: storage: nightly {i}: {sizes[-1][0]:,} bytes ({sizes[-1][1]:,} free)")
            with store.session() as s:
                gone = prune.prune(s, prune.plan(s, keep=KEEP))
                s.commit()
        finally:
            store.dispose()
        pruned = file_pages(path)
        with sqlite3.connect(path) as c:
            c.execute("VACUUM")
        vacuumed = file_pages(path)
    empty, one = sizes[0][0], sizes[1][0]
    run = max(1, one - empty)  # the bytes one run added

    def x(b: int) -> float:
        return (b - empty) / run

    log("bench: storage: file bytes per nightly (0 = the fresh sweep): "
        + ", ".join(f"{b:,}" for b, _ in sizes[1:]))
    figs += [Figure("SQLite: one run's bytes (fresh sweep into an empty file)", run / 2**10, "KiB",
                    spread=f"{len(chosen)} harnesses"),
             Figure("SQLite file after 1st unchanged re-sweep vs one run", x(sizes[2][0]), "x"),
             Figure("SQLite file after 2nd unchanged re-sweep vs one run", x(sizes[3][0]), "x"),
             Figure(f"SQLite file after {nightlies} unchanged nightlies vs one run (steady state)",
                    x(sizes[-1][0]), "x", spread=f"{sizes[-1][1] / run:.2f}x of it free pages"),
             Figure(f"SQLite file growth, last nightly (of {nightlies}), vs one run",
                    100.0 * (sizes[-1][0] - sizes[-2][0]) / run, "%"),
             Figure(f"SQLite file after farm db prune --keep {KEEP} ({gone} runs deleted) vs one run",
                    x(pruned[0]), "x", spread=f"{pruned[1] / run:.2f}x of it free pages"),
             Figure("SQLite file after VACUUM vs one run", x(vacuumed[0]), "x")]
    return figs
