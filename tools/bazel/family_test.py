"""One pytest case per harness of a family (FARM_FAMILY, of the catalog FARM_CATALOG: farm
unless told, pallas for the Pallas kernels), through the same pipeline as
a sweep, at the family's shape kinds (FARM_SHAPES) and, with FARM_VJP=1 or 2, its derivatives to that order;
its artifacts composed (FARM_COMPOSITIONS), made again in a fresh process (FARM_DETERMINISM) and its operands
at edge values (FARM_EDGES) where asked. A case fails on any status that is not ok, expected_fail, skipped or
not_runnable_here: wrong numbers, errors and stale limitations all show."""
import os

import pytest

from farm import catalog
from farm.pipeline import run_harness
from farm.results import Options, choices
from farm.platforms import LOWERING_PLATFORMS, parse_list

FAMILY = os.environ.get("FARM_FAMILY", "elementwise_unary")
PLATFORMS = parse_list(os.environ.get("FARM_PLATFORMS", ",".join(LOWERING_PLATFORMS)), LOWERING_PLATFORMS,
                       "platform")
SHAPES = tuple(os.environ.get("FARM_SHAPES", "static").split(","))
VJP = int(os.environ.get("FARM_VJP", "0") or 0)
#: Each check's which-harnesses option (``farm sweep --compositions``, ``--check-determinism``,
#: ``--edges``...: ``farm.results.choices``) as FARM_<FIELD> (FARM_COMPOSITIONS=all): off unless set
CHOSEN = {c.field: os.environ.get(f"FARM_{c.field.upper()}", c.values[0]) or c.values[0] for c in choices()}
#: FARM_PALLAS_TARGETS: the Pallas targets to export kernels for (``farm sweep --pallas-targets``; default: all)
PALLAS_TARGETS = tuple(t for t in os.environ.get("FARM_PALLAS_TARGETS", "").split(",") if t)
HARNESSES = catalog.select(catalog.Filters(catalog=os.environ.get("FARM_CATALOG", "farm"), family=(FAMILY,)))
ACCEPTED = {"ok", "expected_fail", "skipped", "not_runnable_here"}


@pytest.mark.parametrize("h", HARNESSES, ids=[h.name for h in HARNESSES])
def test_harness(h: catalog.Harness) -> None:
    out = run_harness(h, Options(platforms=PLATFORMS, run_on=("cpu",), repeats=1, shapes=SHAPES, vjp=VJP,
                                 pallas_targets=PALLAS_TARGETS, **CHOSEN))
    bad = [f"{r.stage}/{r.platform}: {r.status}: {r.error}" for r in out.records if r.status not in ACCEPTED]
    assert not bad, "\n".join(bad)
