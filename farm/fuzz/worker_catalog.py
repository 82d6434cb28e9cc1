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
from farm.errors import ConfigError

CATALOG = "fuzz"
ENV = "FARM_FUZZ_CASES"


def read_cases(path: str) -> list[Case]:
    try:
        with open(path, encoding="utf-8") as f:
            return [Case.from_dict(json.loads(line)) for line in f if line.strip()]
    except OSError as e:
        raise ConfigError(f"cannot read the campaign's cases {path!r}: {e.strerror or e}") from None


def write_cases(path: str, cases: list[Case]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(c.to_json() + "\n" for c in cases)


if os.environ.get(ENV):
    for _case in read_cases(os.environ[ENV]):
        define_case(_case, catalog=CATALOG)
