"""The ``export_feature`` stage of an export-feature harness (``Harness.feature``), in the
multi-platform configuration and for the cpu alone, each judged (``farm.judge.features``);
its limitations are applied with the others by ``run_harness``."""
from __future__ import annotations

from typing import Any

from farm.catalog import Harness
from farm.catalog.effects import label
from farm.judge import features as judge
from farm.results import LOWERING_PLATFORMS, Record
from farm.stages import features
from farm.stages.record import failure


def configurations(platforms: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Every platform at once (what most users export), and the cpu alone where it is asked
    (a one-platform module: no platform index argument)."""
    return tuple([platforms] + ([("cpu",)] if len(platforms) > 1 and "cpu" in platforms else []))


def run_features(h: Harness, dyn: list[Any], platforms: tuple[str, ...] = LOWERING_PLATFORMS) -> list[Record]:
    """One judged record per configuration (none for a harness without a feature). Never
    raises: the harness's other records must survive."""
    if h.feature is None:
        return []
    out: list[Record] = []
    for ps in configurations(platforms):
        try:
            rec: Record = features.run(h, dyn, ps)
        except Exception as e:  # the farm's own bug: an error record, never a pass
            rec = failure(Record, "export_feature", label(ps), e, 0.0)
        out.append(judge.feature(h, rec))
    return out
