"""execute: run a compiled executable with warm-up and repeats (median, spread and every
repeat's time, which ``farm.analysis.perf`` judges a change of execute time by)."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.stages.compile import Compiled
from farm.stages.record import failure
from farm.results import Record

#: After the caller's ``warmup`` calls, warming goes on until WARMUP_CALLS calls or
#: WARMUP_S seconds, whichever comes first. Measured on the float32 farm catalog on CPU:
#: after one warm-up call a microsecond kernel's first timed calls ran 2.4x, 1.5x and
#: 1.2x its steady state, which put the median of three repeats 30% high (median over
#: kernels); after ten calls or 1 ms, 6%. A kernel slower than 1 ms gets ``warmup`` calls.
WARMUP_CALLS = 10
WARMUP_S = 1e-3


@dataclass(frozen=True, slots=True)
class Outputs:
    """What an execution returned (``Executed.handle``; stored only as the io artifact)."""

    arrays: list[np.ndarray]  # the flat outputs, as numpy arrays


@dataclass(frozen=True, slots=True)
class Executed(Record):
    """metrics: median/min/max seconds over repeats; facts: ``samples_s``, each timed repeat's
    seconds in order, and ``warmup_calls``; ``handle`` is the ``Outputs``."""


def _block(x: Any) -> Any:
    import jax

    return jax.block_until_ready(x)


def device_memory() -> dict[str, float]:
    """Device memory of this process's default device (empty on CPU): what a GPU run peaked at."""
    import jax

    dev = jax.devices()[0]
    if dev.platform == "cpu":
        return {}
    try:
        stats = dev.memory_stats() or {}
    except Exception:
        return {}
    return {f"device_{k}": float(stats[k]) for k in ("peak_bytes_in_use", "bytes_in_use") if k in stats}


def to_numpy(out: Any) -> list[np.ndarray]:
    import jax

    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)]


def run(compiled: Compiled, dyn: list[Any], *, warmup: int = 1, repeats: int = 3,
        stage: str = "execute") -> Executed:
    if not compiled.ok:
        return Executed(stage, compiled.platform, "skipped", error=f"{compiled.stage} did not succeed")
    exe = compiled.handle.executable
    times: list[float] = []
    t_all = time.perf_counter()
    try:
        out = None
        calls, t_warm = 0, time.perf_counter()
        while calls < warmup or (warmup and calls < WARMUP_CALLS and time.perf_counter() - t_warm < WARMUP_S):
            out = _block(exe(*dyn))
            calls += 1
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = _block(exe(*dyn))
            times.append(time.perf_counter() - t0)
        arrays = to_numpy(out)
        med = statistics.median(times) if times else 0.0
        return Executed(stage, compiled.platform, "ok", time.perf_counter() - t_all,
                        metrics={"execute_s": med, "execute_min_s": min(times, default=0.0),
                                 "execute_max_s": max(times, default=0.0), "repeats": float(repeats),
                                 **device_memory()},
                        facts={"samples_s": times, "warmup_calls": calls}, handle=Outputs(arrays))
    except Exception as e:
        return failure(Executed, stage, compiled.platform, e, time.perf_counter() - t_all)
