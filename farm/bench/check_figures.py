"""What an opt-in check costs, side by side with the sweep it joins: ``farm bench --only
gradients`` (``--vjp``: at most +50%), ``compositions`` (``--compositions``: at most +30%) and
``determinism`` (``--check-determinism``, no goal: its cost is reported).

The two sweeps run by the CLI in fresh processes, into fresh databases, alternating
(without, with; twice in the full figure), so machine noise hits both sides alike: the quick
figure on eight of the farm catalog's primitives, the full one on the whole farm catalog (the
goals' own terms; a few minutes a pair).
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

from farm.bench.figure import Figure

#: The farm catalog's primitives the quick figures sweep (242 harnesses, 91 of them differentiable).
PRIMITIVES = "sin,exp,add,mul,dot_general,reduce_sum,cumsum,tanh"

#: group -> (the sweep options that turn the check on, its goal as a ratio over the plain sweep or None)
CHECKS: dict[str, tuple[tuple[str, ...], float | None]] = {
    "gradients": (("--vjp", "1"), 1.5),
    "compositions": (("--compositions",), 1.3),
    "determinism": (("--check-determinism",), None),
}


def _sweep(url: str, extra: Sequence[str], workers: int, select: list[str]) -> float:
    cmd = [sys.executable, "-m", "farm", "sweep", *select, "--db", url, "--workers", str(workers), "--force", *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def side_by_side(extra: Sequence[str], goal: float | None, quick: bool, log: Callable[[str], None],
                 workers: int = 2) -> list[Figure]:
    """Cold sweeps without and with ``extra``, alternating; the ratio held against ``goal``."""
    pairs = 1 if quick else 2
    select, what = (["--primitive", PRIMITIVES], "8 primitives of the farm catalog") if quick else \
        (["--catalog", "farm"], "the whole farm catalog")
    flag = " ".join(extra)
    plain: list[float] = []
    on: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(pairs):
            log(f"bench: cold sweep {' '.join(select)} ({i + 1}/{pairs})")
            plain.append(_sweep(f"sqlite:///{d}/p{i}.db", (), workers, select))
            log(f"bench: cold sweep {' '.join(select)} {flag} ({i + 1}/{pairs})")
            on.append(_sweep(f"sqlite:///{d}/c{i}.db", extra, workers, select))
    p, c = statistics.mean(plain), statistics.mean(on)
    return [Figure(f"cold sweep, {what}", p, "s", spread=" / ".join(f"{x:.0f}" for x in plain)),
            Figure(f"cold sweep {flag}, the same", c, "s", spread=" / ".join(f"{x:.0f}" for x in on)),
            Figure(f"{flag} over without (side by side)", c / p, "x", goal)]


def check_figures(group: str, quick: bool, log: Callable[[str], None]) -> list[Figure]:
    """The figures of one of ``CHECKS``'s groups."""
    extra, goal = CHECKS[group]
    return side_by_side(extra, goal, quick, log)
