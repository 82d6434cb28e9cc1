"""The minimizer's "same failure" test: two records fail the same way when their failure
signatures (``farm.analysis.signatures``, the triage clusters' identity) agree, with two
parts left out that a shrinking program changes by design: the primitives (the program
loses equations) and the extent of a numeric disagreement (keeping only the failing
elements turns "few of 400" into "one of one"). The kind of disagreement stays: a
113-ULP error that becomes a NaN is another failure.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from farm.analysis.signatures import Signature, signature


def key(record: dict[str, Any]) -> Signature | None:
    """The signature the minimizer compares; None for a record that does not fail."""
    s = signature(record, primitives=(), expected=True)
    if s is None:
        return None
    return dataclasses.replace(s, status="fail" if s.status == "expected_fail" else s.status,
                               numeric=s.numeric.split("/")[0])


def same_failure(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ka, kb = key(a), key(b)
    return ka is not None and ka.key == kb.key if kb is not None else False
