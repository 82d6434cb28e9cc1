"""The ``effects_export`` stage of a harness with side effects, under ``jax.jit`` here
(``native``) and in every export configuration (``farm.catalog.effects.configurations``),
each judged
(``farm.judge.effects``); its limitations are applied with the others by ``run_harness``.
"""
from __future__ import annotations

from typing import Any

from farm.catalog import Harness
from farm.catalog.effects import configurations, label
from farm.judge import verdict
from farm.pipeline.check import Base, Produced, Run, per_config
from farm.results import LOWERING_PLATFORMS, Record, check_spec
from farm.stages import effects


def run_effects(h: Harness, dyn: list[Any], platforms: tuple[str, ...] = LOWERING_PLATFORMS) -> list[Record]:
    """One judged record per configuration (none for a harness without effects). Never
    raises: the harness's other records must survive."""
    if h.effects is None:
        return []
    return per_config("effects_export", (None, *configurations(platforms)),
                      lambda ps: "native" if ps is None else label(ps),
                      lambda ps: effects.run_native(h, dyn) if ps is None else effects.run(h, dyn, ps),
                      lambda rec: verdict(rec, h=h))


class EffectsCheck(Base):
    """A harness with side effects, on its static path (``--shapes static``)."""

    spec = check_spec("effects")

    def applies(self, run: Run) -> bool:
        return run.h.effects is not None and run.static

    def run(self, run: Run) -> Produced:
        return run_effects(run.h, run.dyn, run.opts.platforms), []


CHECK = EffectsCheck()
