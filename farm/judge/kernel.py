"""The one comparison kernel: which elements of a result disagree with their reference.

Every numeric comparison of the judge asks this one function, with the band it allows
(``Allowed``): two output lists under a harness's tolerance (``outputs``), the float64
reference under its policy (``tolerance``), a sum's rounding band (``accumulation``) and a
symbolic call against the static lowering (``symbolic``). How wide the band is is the
caller's (``tolerance`` says how it is chosen); what agreeing means is said once, here:

- integers and bools agree when equal in the dtype compared;
- NaN matches NaN (any payload) and an infinity the same infinity; neither matches
  anything else (an infinite reference has no neighbourhood: ``rtol * inf`` would accept
  anything);
- finite elements agree where ``|got - ref| <= atol + rtol * |ref|`` (``atol``: one number,
  or one per element; with ``rtol`` 0, ``atol`` alone, even where ``|ref|`` overflows);
- where ``signed_zeros``, a zero must also have the reference's sign.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class Allowed:
    """How far each element may be from its reference: ``atol + rtol * |ref|``."""

    rtol: float = 0.0
    atol: float | np.ndarray = 0.0
    signed_zeros: bool = False


#: No difference at all (an exact comparison: the round trip, a stored artifact's bytes).
EXACT = Allowed()


def disagree(got: Any, ref: Any, allowed: Allowed = EXACT, dtype: Any = None) -> np.ndarray:
    """The mask of the elements of ``got`` that disagree with ``ref`` (their shapes broadcast).

    ``dtype``: the dtype compared, ``got``'s if None: integers and bools are compared in it,
    exactly; anything else in float64 (complex128 where either side is complex), as given:
    a caller that wants the reference rounded to the device's dtype first rounds it."""
    got, ref = np.asarray(got), np.asarray(ref)
    dt = got.dtype if dtype is None else np.dtype(dtype)
    if dt.kind in "biu":
        return np.asarray(got.astype(dt) != ref.astype(dt))
    wide = np.complex128 if got.dtype.kind == "c" or ref.dtype.kind == "c" else np.float64
    with np.errstate(all="ignore"):
        g, r = got.astype(wide, copy=False), ref.astype(wide, copy=False)
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        limit = allowed.atol + allowed.rtol * np.abs(r) if allowed.rtol else allowed.atol
        close = np.isfinite(g) & np.isfinite(r) & (np.abs(g - r) <= limit)
        bad = ~(same | close)
        if allowed.signed_zeros:
            bad |= (g == 0) & (r == 0) & (np.signbit(g) != np.signbit(r))
    return np.asarray(bad)
