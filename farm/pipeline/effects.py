"""The ``effects_export`` stage of a harness with side effects, under ``jax.jit`` here
(``native``) and in every export configuration (``farm.catalog.effects.configurations``),
each judged
(``farm.judge.effects``); its limitations are applied with the others by ``run_harness``.
"""
from __future__ import annotations

from typing import Any

from farm.catalog import Harness
from farm.catalog.effects import configurations, label
from farm.judge import effects as judge
from farm.results import LOWERING_PLATFORMS, Record
from farm.stages import effects
from farm.stages.record import failure


def run_effects(h: Harness, dyn: list[Any], platforms: tuple[str, ...] = LOWERING_PLATFORMS) -> list[Record]:
    """One judged record per configuration (none for a harness without effects). Never
    raises: the harness's other records must survive."""
    if h.effects is None:
        return []
    out: list[Record] = []
    for ps in (None, *configurations(platforms)):
        try:
            rec: Record = effects.run_native(h, dyn) if ps is None else effects.run(h, dyn, ps)
        except Exception as e:  # the farm's own bug: an error record, never a pass
            rec = failure(Record, "effects_export", "native" if ps is None else label(ps), e, 0.0)
        out.append(judge.effects(h, rec))
    return out
