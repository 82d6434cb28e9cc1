"""Results that are not unique, and the invariant each is checked by instead.

An eigenvector is unique only up to a sign or phase, eig returns its eigenvalues in no
defined order, QR's signs and an SVD's vectors differ between two correct LAPACK-like
kernels, an unstable sort orders tied
keys' payloads any way it likes, an approximate top-k may miss some of the true top k,
and ``rng_bit_generator``'s bits are implementation-defined. Comparing such outputs with
one valid answer element by element would fail correct kernels (TPU's QR signs, cuSOLVER's
SVD), so the verdict names them here and checks the device's values by their defining
property, computed in float64 from the reference's own inputs to the equation.
(Results with an *unspecified part*, such as cholesky_p's upper triangle, are handled by
``farm.reference.evaluator.unspecified`` instead: evaluated twice with two fillings.)

``NON_UNIQUE[primitive](params)`` gives the output indices that are not unique (an empty
set: all of them are unique for these params). ``check(tap, got, dtypes)`` returns one
``Checked`` per invariant: the error, the bound it must stay under, and what it measures.
``got`` holds the device's values of the equation's outputs that reach the harness's
outputs unchanged; any other output is taken from the reference.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import scipy.optimize

from farm.reference.evaluator import Tap


#: epsilons times the matrix size a residual of a non-unique result may reach
INVARIANT_ULPS = 16


def invariant_bound(dtype: Any, n: int) -> float:
    """How large a non-unique result's residual may be, for an n x n problem of ``dtype``."""
    return INVARIANT_ULPS * max(int(n), 1) * eps(dtype)


def eps(dtype: Any) -> float:
    dt = np.dtype(dtype)
    if dt.kind == "c":
        dt = np.dtype(np.float32 if dt.itemsize == 8 else np.float64)
    if dt.kind in "biu":
        return 0.0
    return float(ml_dtypes.finfo(dt).eps)


@dataclass(frozen=True)
class Checked:
    """One invariant's outcome: ``ok`` when ``error <= bound``."""

    what: str
    error: float
    bound: float

    @property
    def ok(self) -> bool:
        return bool(self.error <= self.bound)  # NaN is not ok


NonUnique = Callable[[dict[str, Any]], frozenset[int]]
Invariant = Callable[[Tap, dict[int, np.ndarray], list[np.dtype]], list[Checked]]

NON_UNIQUE: dict[str, NonUnique] = {
    "eigh": lambda p: frozenset({0}),  # (vectors, values): values are unique
    "eig": lambda p: frozenset({0, 1, 2}),  # values in no defined order, vectors up to scale
    "svd": lambda p: frozenset({1, 2}) if p.get("compute_uv") else frozenset(),  # (s, u, vt)
    "qr": lambda p: frozenset({0, 1}),  # signs of Q's columns and R's rows
    "sort": lambda p: frozenset() if p.get("is_stable") else frozenset(range(p["num_keys"], 1 << 16)),
    "approx_top_k": lambda p: frozenset({0, 1}),
    "rng_bit_generator": lambda p: frozenset({0, 1}),
}

INVARIANTS: dict[str, Invariant] = {}


def invariant(name: str) -> Callable[[Invariant], Invariant]:
    def deco(fn: Invariant) -> Invariant:
        INVARIANTS[name] = fn
        return fn
    return deco


def non_unique(primitive: str, params: dict[str, Any], n_outputs: int) -> frozenset[int]:
    """The outputs of one equation that are not unique (indices below ``n_outputs``)."""
    spec = NON_UNIQUE.get(primitive)
    return frozenset() if spec is None else frozenset(i for i in spec(params) if i < n_outputs)


def check(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    """The invariants of one non-unique equation, on the device's outputs ``got``."""
    return INVARIANTS[tap.primitive](tap, got, dtypes)


# ---------------------------------------------------------------- helpers
def _out(tap: Tap, got: dict[int, np.ndarray], i: int) -> np.ndarray:
    """Output ``i`` in float64/complex128: the device's if it reached the harness's outputs."""
    x = np.asarray(got[i] if i in got else tap.outs[i])
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64) if x.dtype.kind in "fcV" or \
        x.dtype.name == "bfloat16" else x


def _norm(x: np.ndarray) -> np.ndarray:
    """Max-norm over the last two axes (one per batch element)."""
    return np.max(np.abs(x), axis=(-2, -1), initial=0.0) if x.size else np.zeros(x.shape[:-2])


def _rel(residual: np.ndarray, scale: np.ndarray) -> float:
    """The worst batch element's ``||residual|| / ||scale||`` (0 when both are zero)."""
    r, s = _norm(residual), _norm(scale)
    with np.errstate(all="ignore"):
        out = np.where(r == 0, 0.0, r / np.where(s == 0, 1.0, s))
    return float(np.max(out, initial=0.0)) if not np.any(np.isnan(r)) else float("nan")


def _h(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


def _eye_err(q: np.ndarray) -> float:
    """How far ``q``'s columns are from orthonormal."""
    g = _h(q) @ q
    return _rel(g - np.eye(g.shape[-1]), np.ones(g.shape[:-2] + (1, 1)))


def _real(dt: np.dtype) -> np.dtype:
    dt = np.dtype(dt)
    return np.dtype(np.float32 if dt == np.complex64 else np.float64) if dt.kind == "c" else dt


# ---------------------------------------------------------------- linear algebra
@invariant("eigh")
def _eigh(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    a = tap.ins[0].astype(np.complex128 if np.iscomplexobj(tap.ins[0]) else np.float64)
    tri = np.tril(a) if tap.params.get("lower", True) else np.triu(a)
    a = tri + _h(tri) - np.eye(a.shape[-1]) * np.diagonal(tri, axis1=-2, axis2=-1)[..., None, :].real
    v, w = _out(tap, got, 0), _out(tap, got, 1)
    bound = invariant_bound(_real(dtypes[0]), a.shape[-1])
    return [Checked("||A V - V diag(w)|| / ||A||", _rel(a @ v - v * w[..., None, :], a), bound),
            Checked("||V^H V - I||", _eye_err(v), bound)]


@invariant("eig")
def _eig(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    a = tap.ins[0].astype(np.complex128)
    n = a.shape[-1]
    bound = invariant_bound(_real(dtypes[0]), n)
    w = _out(tap, got, 0)
    out = [Checked("eigenvalues vs the reference's, matched as a multiset, / ||A||",
                   _multiset_err(w, tap.outs[0], _norm(a)), max(bound, 8 * np.sqrt(eps(_real(dtypes[0])))))]
    i = 1
    if tap.params.get("compute_left_eigenvectors", True):
        vl = _out(tap, got, i)
        out.append(Checked("||VL^H A - diag(w) VL^H|| / (||A|| ||VL||)",
                           _rel(_h(vl) @ a - w[..., :, None] * _h(vl), a * _norm(vl)[..., None, None]), bound))
        i += 1
    if tap.params.get("compute_right_eigenvectors", True):
        vr = _out(tap, got, i)
        out.append(Checked("||A VR - VR diag(w)|| / (||A|| ||VR||)",
                           _rel(a @ vr - vr * w[..., None, :], a * _norm(vr)[..., None, None]), bound))
    return out


def _multiset_err(w: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> float:
    """The largest distance between ``w`` and ``ref`` paired one to one (per batch element)."""
    worst = 0.0
    if w.size == 0:
        return worst
    flat_w, flat_r = w.reshape(-1, w.shape[-1]), np.asarray(ref).reshape(-1, w.shape[-1])
    flat_s = np.broadcast_to(np.asarray(scale, dtype=np.float64), w.shape[:-1]).reshape(-1)
    for x, y, s in zip(flat_w, flat_r, flat_s):
        if not np.all(np.isfinite(x)):
            return float("nan")
        cost = np.abs(x[:, None] - y[None, :])
        rows, cols = scipy.optimize.linear_sum_assignment(cost)
        worst = max(worst, float(cost[rows, cols].max(initial=0.0)) / (s if s else 1.0))
    return worst


@invariant("svd")
def _svd(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    a = tap.ins[0].astype(np.complex128 if np.iscomplexobj(tap.ins[0]) else np.float64)
    s, u, vt = _out(tap, got, 0), _out(tap, got, 1), _out(tap, got, 2)
    k = s.shape[-1]
    bound = invariant_bound(_real(dtypes[0]), max(a.shape[-2:]))
    return [Checked("||A V - U diag(s)|| / ||A||", _rel(a @ _h(vt[..., :k, :]) - u[..., :, :k] * s[..., None, :], a),
                    bound),
            Checked("||U^H U - I||", _eye_err(u), bound), Checked("||V^H V - I||", _eye_err(_h(vt)), bound)]


@invariant("qr")
def _qr(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    a = tap.ins[0].astype(np.complex128 if np.iscomplexobj(tap.ins[0]) else np.float64)
    q, r = _out(tap, got, 0), _out(tap, got, 1)
    bound = invariant_bound(_real(dtypes[0]), max(a.shape[-2:]))
    return [Checked("||A - Q R|| / ||A||", _rel(a - q @ r, a), bound),
            Checked("||Q^H Q - I||", _eye_err(q), bound),
            Checked("||strictly lower part of R|| / ||A||", _rel(np.tril(r, -1), a), bound)]


# ---------------------------------------------------------------- sorting and selection
@invariant("sort")
def _sort(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    """Tied keys may carry their payloads in any order: each row's (keys, payload) tuples
    must be the reference's, as a multiset; the keys themselves are compared directly."""
    dim, nk = tap.params["dimension"], tap.params["num_keys"]
    outs = [np.moveaxis(np.asarray(got[i] if i in got else tap.outs[i]), dim, -1) for i in range(len(tap.outs))]
    refs = [np.moveaxis(np.asarray(o), dim, -1) for o in tap.outs]
    bad = 0
    for row in np.ndindex(*outs[0].shape[:-1]):
        mine = sorted(zip(*(_sortable(o[row]) for o in outs)))
        theirs = sorted(zip(*(_sortable(np.asarray(r[row]).astype(o.dtype)) for r, o in zip(refs, outs))))
        bad += sum(x != y for x, y in zip(mine, theirs))
    del nk
    return [Checked("(key, payload) tuples differing from the reference's per row", float(bad), 0.0)]


def _sortable(x: np.ndarray) -> list[Any]:
    """Values that compare and hash exactly (NaNs as a marker, complex as pairs)."""
    if x.dtype.kind == "c":
        return [(_f(v.real), _f(v.imag)) for v in x]
    if x.dtype.kind in "f" or x.dtype.name == "bfloat16":
        return [_f(v) for v in x.astype(np.float64)]
    return x.tolist()


def _f(v: float) -> tuple[int, float]:
    return (1, 0.0) if np.isnan(v) else (0, float(v))


@invariant("approx_top_k")
def _approx_top_k(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    """Every value is the operand's at its index, values are ordered, and the recall of the
    true top k reaches ``recall_target``."""
    x = np.asarray(tap.ins[0])
    dim = tap.params.get("reduction_dimension", -1)
    vals, idx = np.asarray(_out(tap, got, 0)), np.asarray(got[1] if 1 in got else tap.outs[1]).astype(np.int64)
    xm, vm, im = (np.moveaxis(a, dim, -1) for a in (x, vals, idx))
    ref_idx = np.moveaxis(np.asarray(tap.outs[1]), dim, -1)
    if np.any((im < 0) | (im >= xm.shape[-1])):
        return [Checked("indices outside the operand", 1.0, 0.0)]
    at = np.take_along_axis(xm, im, axis=-1)
    wrong = float(np.sum(~((at == vm) | (np.isnan(at) & np.isnan(vm)))))
    step = np.diff(vm, axis=-1)
    unordered = float(np.sum(step > 0 if tap.params.get("is_max_k", True) else step < 0))
    k = im.shape[-1]
    recall = np.mean([len(set(a.tolist()) & set(b.tolist())) / max(k, 1)
                      for a, b in zip(im.reshape(-1, k), ref_idx.reshape(-1, k))]) if im.size else 1.0
    return [Checked("values differing from the operand at their index", wrong, 0.0),
            Checked("values out of order", unordered, 0.0),
            Checked("1 - recall of the true top k", 1.0 - float(recall), 1.0 - tap.params.get("recall_target", 0.95))]


# ---------------------------------------------------------------- random bits
@invariant("rng_bit_generator")
def _rng_bit_generator(tap: Tap, got: dict[int, np.ndarray], dtypes: list[np.dtype]) -> list[Checked]:
    """Implementation-defined bits: each bit position must be set about half the time
    (within 6 standard deviations over the sample), and the new key must differ from the
    old one."""
    bits = np.asarray(got[1] if 1 in got else tap.outs[1])
    width = bits.dtype.itemsize * 8
    flat = bits.reshape(-1).view(np.dtype(f"u{bits.dtype.itemsize}"))
    out = []
    if flat.size >= 16:
        ones = np.array([np.mean((flat >> np.uint64(b)) & 1) for b in range(width)]) if width == 64 else \
            np.array([np.mean((flat.astype(np.uint64) >> np.uint64(b)) & 1) for b in range(width)])
        out.append(Checked("max over bit positions of |P(bit set) - 1/2| / (6 sigma)",
                           float(np.max(np.abs(ones - 0.5))) / (6 * 0.5 / np.sqrt(flat.size)), 1.0))
    if 0 in got:
        same = np.array_equal(np.asarray(got[0]), np.asarray(tap.ins[0]))
        out.append(Checked("new key equal to the old key", float(same), 0.0))
    return out
