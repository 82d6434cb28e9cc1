"""The ``pallas_export`` stage of a Pallas harness, once per target its kernel is written for
among the sweep's platforms and ``Options.pallas_targets`` (``farm.catalog.pallas.targets``),
each judged (``farm.judge.pallas``), and the interpret-mode kernel against its own jnp
reference where it ships one; its limitations are applied with the others by ``run_harness``.
"""
from __future__ import annotations

from typing import Any

from farm.catalog import Harness
from farm.catalog.pallas import targets
from farm.judge import pallas as judge
from farm.results import Options, Record
from farm.stages import pallas
from farm.stages.record import failure


def run_pallas(h: Harness, dyn: list[Any], opts: Options) -> list[Record]:
    """One judged record per target (none for a harness without a kernel). Never raises:
    the harness's other records must survive."""
    if h.pallas is None:
        return []
    out: list[Record] = []
    for t in targets(h.pallas, opts.platforms, opts.pallas_targets):
        try:
            rec: Record = pallas.run(h, dyn, t)
        except Exception as e:  # the farm's own bug: an error record, never a pass
            rec = failure(Record, "pallas_export", t.label, e, 0.0)
        out.append(judge.pallas(rec))
    if h.pallas.reference is not None:
        try:
            out.append(judge.own_reference(h, pallas.run_reference(h, dyn)))
        except Exception as e:  # the farm's own bug: an error record, never a pass
            out.append(failure(Record, "pallas_reference", "cpu", e, 0.0))
    return out
