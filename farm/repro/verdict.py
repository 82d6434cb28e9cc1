"""How a reproducer script judges what it ran (``Check``): the script (``farm.repro.script``)
writes it into the file, and the invariant check (``farm.repro.invariant``) fills its
``invariant`` part; both import it from here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """How a script judges: ``kind`` values | error | crash | timeout; for values, the
    tolerance (``rtol``, ``atol``, pointwise or scaled by the reference's max-norm, exact,
    zeros' signs) and what the expected values are."""

    kind: str
    against: str = "the float64 reference"
    rtol: float = 0.0
    atol: float = 0.0
    pointwise: bool = True
    exact: bool = False
    signed_zeros: bool = True
    error_type: str | None = None
    timeout_s: float = 120.0
    match_type: bool = False  # an error counts only if its type is ``error_type``
    invariant: dict[str, Any] | None = None  # kind invariant: primitive, params, outputs, dtype, bound

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "against": self.against, "rtol": self.rtol, "atol": self.atol,
                "pointwise": self.pointwise, "exact": self.exact, "signed_zeros": self.signed_zeros,
                "error_type": self.error_type, "timeout_s": self.timeout_s, "match_type": self.match_type,
                **({"invariant": self.invariant} if self.invariant else {})}
