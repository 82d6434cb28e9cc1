"""The results contract: records and outcomes cross processes as dicts and come back equal."""
from __future__ import annotations

from dataclasses import fields

import pytest

from farm.results import Artifact, Outcome, Record

#: a value unlike each field's default, by name (every field of Record must be here)
SAMPLE = {"stage": "lower", "platform": "tpu", "status": "fail", "seconds": 1.25, "error_type": "E",
          "error": "it broke", "detail": "Traceback ...", "metrics": {"max_ulp": 3.0},
          "facts": {"module_sha256": "ab"}, "artifact": "cd" * 32}


def test_every_field_of_a_record_survives_its_dict() -> None:
    # from_dict sets each slot itself: a field it forgets is unset (AttributeError) or lost here
    names = [f.name for f in fields(Record) if f.compare]
    assert sorted(names) == sorted(SAMPLE), "a new Record field: add it to SAMPLE and to Record.from_dict"
    r = Record(**SAMPLE)
    back = Record.from_dict(r.to_dict())
    assert back == r and {n: getattr(back, n) for n in names} == SAMPLE and back.handle is None


def test_a_record_from_a_sparse_dict_takes_the_defaults_and_an_unknown_status_is_refused() -> None:
    r = Record.from_dict({"stage": "trace", "platform": "any", "status": "ok"})
    assert (r.metrics, r.facts, r.error, r.artifact) == ({}, {}, None, None)
    with pytest.raises(ValueError, match="unknown status"):
        Record.from_dict({"stage": "trace", "platform": "any", "status": "fine"})


def test_an_outcome_survives_its_dict() -> None:
    o = Outcome("fp", "sin_f32", (Record(**SAMPLE), Record("trace", "any", "ok")),
                (Artifact("ef" * 32, "export", b"\x00mlir", {"jax_version": "0.10.2"}),), 2.5, "ray:n:1",
                "rk", "dk", "depk", {"set": "x", "rows": {}})
    assert Outcome.from_dict(o.to_dict()) == o
