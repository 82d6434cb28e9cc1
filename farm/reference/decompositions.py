"""Two output sets of one decomposition compared by what they describe, not element by
element: eigenvectors, Schur vectors, singular vectors and QR's signs are not unique, so a
stored artifact's outputs and a replay's may both be right and still differ.

``distance`` rebuilds the operand each set describes (and, for eigen-decompositions, sorts
the eigenvalues) and returns their relative distance in float64; the bound it is held to
is the one every invariant is held to (``farm.judge.tolerance``, kind ``invariant``).
Layouts are those of ``lax.linalg``: eigh (v, w), eig (w, vl, vr), schur (t, q), svd
(u, s, vh) in any order of the 1-D output, qr (q, r).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Primitives whose outputs ``distance`` can compare by the operand they describe.
DECOMPOSITIONS = ("eig", "eigh", "schur", "svd", "qr")


def reconstruct(primitive: str, outs: Sequence[np.ndarray]) -> np.ndarray | None:
    """The operand a decomposition's outputs describe, or None when the layout is unknown."""
    o = [np.asarray(x).astype(np.complex128) for x in outs]
    try:
        if primitive == "eigh" and len(o) == 2 and o[1].ndim == o[0].ndim - 1:
            v, w = o
            return (v * w[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
        if primitive == "eig" and len(o) >= 2 and o[0].ndim == o[-1].ndim - 1:
            w, vr = o[0], o[-1]
            return (vr * w[..., None, :]) @ np.linalg.inv(vr)
        if primitive == "schur" and len(o) == 2 and o[0].ndim == 2 and o[1].ndim == 2:
            t, q = o
            return q @ t @ np.conj(q.T)
        if primitive == "svd" and len(o) == 3:
            return _svd(o)
        if primitive == "qr" and len(o) == 2:
            return o[0] @ o[1]
    except (np.linalg.LinAlgError, ValueError):
        return None
    return None


def _svd(o: list[np.ndarray]) -> np.ndarray | None:
    one = [i for i, x in enumerate(o) if x.ndim == o[0].ndim - 1 or x.ndim == 1]
    if len(one) != 1:
        return None
    s = o[one[0]]
    u, vh = [x for i, x in enumerate(o) if i != one[0]]
    k = s.shape[-1]
    return (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]


def distance(primitive: str, actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float | None:
    """Relative distance between the operands both output sets describe (plus, for
    eigen-decompositions, between the sorted eigenvalues). None: no reconstruction known."""
    a, e = reconstruct(primitive, actual), reconstruct(primitive, expected)
    if a is None or e is None or a.shape != e.shape:
        return None
    err = float(np.linalg.norm(a - e)) / max(float(np.linalg.norm(e)), 1e-30)
    values = {"eigh": 1, "eig": 0}.get(primitive)
    if values is not None:
        wa = np.sort_complex(np.asarray(actual[values]).astype(np.complex128).ravel())
        we = np.sort_complex(np.asarray(expected[values]).astype(np.complex128).ravel())
        err = max(err, float(np.linalg.norm(wa - we)) / max(float(np.linalg.norm(we)), 1e-30))
    return err


def size(outs: Sequence[np.ndarray]) -> int:
    """The problem size n an invariant bound scales with: the largest trailing dimension."""
    return max((int(np.shape(x)[-1]) for x in outs if np.ndim(x) >= 1), default=1)
