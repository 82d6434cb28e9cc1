"""What a worker imports to know a campaign's cases: ``--modules farm.fuzz.worker_catalog``.

The driver writes the cases it drew to a JSON-lines file and names it in
``FARM_FUZZ_CASES`` (passed to every worker's environment); importing this module defines
each case in the ``fuzz`` catalog, so the worker finds the driver's harnesses by
fingerprint (same case, same harness). The file must be readable where the workers run:
on a multi-node cluster, a shared path.
"""
from __future__ import annotations

import json
import os

from farm.catalog.cases import Case, define_case
from farm.catalog.harness import Limitation
from farm.errors import ConfigError
from farm.fuzz.known import limitations

CATALOG = "fuzz"
ENV = "FARM_FUZZ_CASES"


def read_cases(path: str) -> list[tuple[Case, tuple[Limitation, ...]]]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise ConfigError(f"cannot read the campaign's cases {path!r}: {e.strerror or e}") from None
    return [(Case.from_dict(d["case"]), tuple(_limitation(x) for x in d["limitations"])) for d in lines]


def write_cases(path: str, cases: list[Case]) -> None:
    """Each case with its limitations (so a worker need not load the farm catalog to know them)."""
    with open(path, "w", encoding="utf-8") as f:
        for c in cases:
            lims = [{k: getattr(lim, k) for k in lim.__dataclass_fields__} for lim in limitations(c.primitive, c.dtype)]
            f.write(json.dumps({"case": c.to_dict(), "limitations": lims}, sort_keys=True) + "\n")


def _limitation(d: dict) -> Limitation:
    return Limitation(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


def define(case: Case, lims: tuple[Limitation, ...] | None = None):  # noqa: ANN201
    """The case's harness in the ``fuzz`` catalog, with what the farm catalog knows about its
    primitive (``lims``, else looked up: that loads the farm catalog, ~3 s once)."""
    return define_case(case, catalog=CATALOG,
                       limitations=limitations(case.primitive, case.dtype) if lims is None else lims)


if os.environ.get(ENV):
    for _case, _lims in read_cases(os.environ[ENV]):
        define(_case, _lims)
