"""lower: per-platform lowering from any host (``traced.lower(lowering_platforms=(p,))``)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from farm.stages.record import Record, Timer, failure
from farm.stages.trace import Traced


@dataclass(frozen=True, slots=True)
class Lowered(Record):
    """facts: module sha256 and size; ``handle`` is the jax Lowered object."""


def run(traced: Traced, platform: str) -> Lowered:
    if not traced.ok:
        return Lowered("lower", platform, "skipped", error="trace did not succeed")
    jtraced = traced.handle[0]
    timer = Timer()
    try:
        with timer():
            lowered = jtraced.lower(lowering_platforms=(platform,))
            module = lowered.compiler_ir("stablehlo")
        text = module.operation.get_asm(large_elements_limit=64)
        sha = hashlib.sha256(text.encode()).hexdigest()
        return Lowered("lower", platform, "ok", timer.seconds,
                       metrics={"module_bytes": float(len(text))},
                       facts={"module_sha256": sha}, handle=(lowered, module, text))
    except Exception as e:
        return failure(Lowered, "lower", platform, e, timer.seconds)
