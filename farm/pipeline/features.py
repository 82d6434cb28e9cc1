"""The ``export_feature`` stage of an export-feature harness (``Harness.feature``), in the
multi-platform configuration and for the cpu alone, each judged (``farm.judge.features``);
its limitations are applied with the others by ``run_harness``."""
from __future__ import annotations

from typing import Any

from farm.catalog import Harness
from farm.catalog.effects import label
from farm.judge import verdict
from farm.pipeline.check import Base, Produced, Run, per_config
from farm.results import LOWERING_PLATFORMS, Record, check_spec
from farm.stages import features


def configurations(platforms: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Every platform at once (what most users export), and the cpu alone where it is asked
    (a one-platform module: no platform index argument)."""
    return tuple([platforms] + ([("cpu",)] if len(platforms) > 1 and "cpu" in platforms else []))


def run_features(h: Harness, dyn: list[Any], platforms: tuple[str, ...] = LOWERING_PLATFORMS) -> list[Record]:
    """One judged record per configuration (none for a harness without a feature). Never
    raises: the harness's other records must survive."""
    if h.feature is None:
        return []
    return per_config("export_feature", configurations(platforms), label, lambda ps: features.run(h, dyn, ps),
                      lambda rec: verdict(rec, h=h))


class FeaturesCheck(Base):
    """An export-feature harness, on its static path."""

    spec = check_spec("features")

    def applies(self, run: Run) -> bool:
        return run.h.feature is not None and run.static

    def run(self, run: Run) -> Produced:
        return run_features(run.h, run.dyn, run.opts.platforms), []


CHECK = FeaturesCheck()
