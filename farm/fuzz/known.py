"""The known gaps of a generated case: the farm catalog's own ``Limitation`` data for the
same primitive and dtype, where it is a fact about the primitive rather than one input.

A structural limitation (census: a chlo op crossing the plugin boundary; lower, export,
serialize, compile: no rule for that dtype) holds at every shape, so a fuzz case inherits
it and is ``expected_fail`` exactly where the catalog's harness is. A ``compare``
limitation that declares a failure is about the catalog harness's own inputs and is not
inherited (it could hide a finding); one that only widens the tolerance is.
"""
from __future__ import annotations

import functools

from farm.catalog.harness import Limitation
from farm.catalog.registry import load

STRUCTURAL = ("census", "lower", "export", "serialize", "compile")


@functools.cache
def _table() -> dict[tuple[str, str], tuple[Limitation, ...]]:
    out: dict[tuple[str, str], dict[Limitation, None]] = {}
    for h in load("farm"):
        for lim in h.limitations:
            if lim.stage in STRUCTURAL or (lim.stage == "compare" and lim.tol is not None):
                out.setdefault((h.primitive, h.dtype), {})[lim] = None
    return {k: tuple(v) for k, v in out.items()}


def limitations(primitive: str, dtype: str) -> tuple[Limitation, ...]:
    """What the farm catalog knows about ``primitive`` in ``dtype`` at any shape."""
    return _table().get((primitive, dtype), ())
