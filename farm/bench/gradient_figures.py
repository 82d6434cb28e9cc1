"""``farm bench --only gradients``: what ``farm sweep --vjp`` costs, side by side with the
sweep it joins (issue 43's goal: ``--vjp`` adds at most 50% to a cold sweep).

The two sweeps run by the CLI in fresh processes, into fresh databases, alternating
(without, with; twice in the full figure), so machine noise hits both sides alike: the quick
figure on eight of the farm catalog's primitives whose harnesses are mostly differentiable,
the full one on the whole farm catalog (the goal's own terms; about 4 minutes a pair).
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from farm.bench.figure import Figure

#: The farm catalog's primitives the figure sweeps (242 harnesses, 91 of them differentiable).
PRIMITIVES = "sin,exp,add,mul,dot_general,reduce_sum,cumsum,tanh"


def _sweep(url: str, vjp: str | None, workers: int, select: list[str]) -> float:
    cmd = [sys.executable, "-m", "farm", "sweep", *select, "--db", url, "--workers", str(workers),
           "--force"] + (["--vjp", vjp] if vjp else [])
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def gradient_figures(quick: bool, log: Callable[[str], None], workers: int = 2, order: str = "1") -> list[Figure]:
    """Cold sweeps without and with ``--vjp ORDER``, alternating."""
    pairs = 1 if quick else 2
    select, what = (["--primitive", PRIMITIVES], "8 primitives of the farm catalog") if quick else \
        (["--catalog", "farm"], "the whole farm catalog")
    plain: list[float] = []
    vjp: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(pairs):
            log(f"bench: cold sweep {' '.join(select)} ({i + 1}/{pairs})")
            plain.append(_sweep(f"sqlite:///{d}/p{i}.db", None, workers, select))
            log(f"bench: cold sweep {' '.join(select)} --vjp {order} ({i + 1}/{pairs})")
            vjp.append(_sweep(f"sqlite:///{d}/v{i}.db", order, workers, select))
    p, v = statistics.mean(plain), statistics.mean(vjp)
    return [Figure(f"cold sweep, {what}", p, "s", spread=" / ".join(f"{x:.0f}" for x in plain)),
            Figure(f"cold sweep --vjp {order}, the same", v, "s", spread=" / ".join(f"{x:.0f}" for x in vjp)),
            Figure(f"--vjp {order} over no --vjp (side by side)", v / p, "x", 1.5)]
