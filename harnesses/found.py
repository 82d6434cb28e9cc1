"""Found: harnesses that `farm fuzz` found failing and someone kept (docs/fuzzing.md).

Each ``harnesses/found/*.json`` is one finding: a generated case as plain data
(``farm.catalog.cases.Case``), shrunk, with the failure it showed as a ``Limitation`` (an
open bug is ``expected_fail``; once fixed, ``unexpected_pass`` says so). A bug found once
is a permanent regression harness. The float64 jaxpr reference judges them.
"""
import glob
import json
import os

from farm.catalog import Limitation
from farm.catalog.cases import Case, define_case

FAMILY = "found"
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "found")


def _limitation(d):
    if not d:
        return ()
    return (Limitation(d["description"], platforms=tuple(d.get("platforms") or ()), stage=d.get("stage", "compare"),
                       status=d.get("status")),)


for _path in sorted(glob.glob(os.path.join(HERE, "*.json"))):
    with open(_path, encoding="utf-8") as _f:
        _d = json.load(_f)
    define_case(Case.from_dict(_d["case"]), catalog="farm", family=FAMILY, limitations=_limitation(_d.get("expect")),
                source=f"found/{os.path.basename(_path)}")
