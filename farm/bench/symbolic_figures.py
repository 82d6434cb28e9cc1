"""``farm bench --only symbolic``: what symbolic variants cost, side by side with the static
sweep they join (issue 42's goal: ``--shapes static,symbolic`` at most 1.6x ``--shapes
static`` on a cold sweep of the upstream catalog).

The two sweeps run by the CLI in fresh processes, into fresh databases, alternating
(static, both, static, both in the full figure), so machine noise hits both sides alike.
``quick``: a slice of the catalog (``--limit``), one pair.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from farm.bench.figure import Figure


def _sweep(url: str, shapes: str, catalog: str, limit: int | None, workers: int) -> float:
    cmd = [sys.executable, "-m", "farm", "sweep", "--catalog", catalog, "--db", url, "--workers", str(workers),
           "--shapes", shapes]
    if limit:
        cmd += ["--limit", str(limit)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def symbolic_figures(quick: bool, log: Callable[[str], None], workers: int = 2, catalog: str = "upstream",
                     limit: int | None = None) -> list[Figure]:
    """Cold sweeps at ``--shapes static`` and ``--shapes static,symbolic``, alternating."""
    limit = limit or (300 if quick else None)
    pairs = 1 if quick else 2
    static: list[float] = []
    both: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(pairs):
            log(f"bench: cold sweep {catalog}{f' (first {limit})' if limit else ''} --shapes static ({i + 1}/{pairs})")
            static.append(_sweep(f"sqlite:///{d}/s{i}.db", "static", catalog, limit, workers))
            log(f"bench: cold sweep {catalog} --shapes static,symbolic ({i + 1}/{pairs})")
            both.append(_sweep(f"sqlite:///{d}/b{i}.db", "static,symbolic", catalog, limit, workers))
    s, b = statistics.mean(static), statistics.mean(both)
    what = f"{catalog} catalog" + (f", first {limit} harnesses" if limit else "")
    return [Figure(f"cold sweep --shapes static, {what}", s, "s", spread=" / ".join(f"{x:.0f}" for x in static)),
            Figure(f"cold sweep --shapes static,symbolic, {what}", b, "s", spread=" / ".join(f"{x:.0f}" for x in both)),
            Figure("--shapes static,symbolic over --shapes static (side by side)", b / s, "x", 1.6)]
