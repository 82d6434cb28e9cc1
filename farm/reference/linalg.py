"""Matrix decompositions and FFT in float64 (complex128) with NumPy/SciPy, batched over
the leading dimensions.

Every rule gives one valid result. Where that result is not unique (eigen- and singular
vectors up to a sign or phase, QR's signs, eig's order, cholesky_p's unspecified upper
triangle) the verdict does not compare it element by element: ``farm.reference.invariants``
names those outputs and checks the device's by their defining property instead.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from farm.reference.evaluator import AmbiguousResult, Ctx, register, unspecified


def _batched(fn: Any, *xs: np.ndarray, core: int = 2) -> list[np.ndarray]:
    """Apply ``fn`` to each matrix of the batch; ``fn`` returns a tuple of arrays."""
    batch = xs[0].shape[:-core]
    results = None
    for b in np.ndindex(*batch):
        outs = fn(*(x[b] for x in xs))
        if results is None:
            results = [np.empty(batch + np.shape(o), dtype=np.asarray(o).dtype) for o in outs]
        for r, o in zip(results, outs):
            r[b] = o
    if results is None:  # empty batch: shapes from one call on zeros
        outs = fn(*(np.zeros(x.shape[-core:], x.dtype) for x in xs))
        results = [np.empty(batch + np.shape(o), dtype=np.asarray(o).dtype) for o in outs]
    return results


@register("cholesky")
def _cholesky(ctx: Ctx, a: np.ndarray, **_: Any) -> np.ndarray:
    """``cholesky_p`` defines only the lower triangle (``lax.linalg.cholesky`` applies
    ``tril`` to it afterwards; LAPACK leaves the input in the upper one): the strictly
    upper triangle is ``unspecified()``."""
    def one(m: np.ndarray) -> tuple[np.ndarray]:
        try:
            return (np.linalg.cholesky(m),)
        except np.linalg.LinAlgError:  # not positive definite: NaNs, as JAX returns
            return (np.full(m.shape, np.nan, dtype=m.dtype),)
    out = _batched(one, a)[0]
    upper = np.triu(np.ones(a.shape[-2:], dtype=bool), 1)
    return np.where(upper, unspecified(), out)


@register("triangular_solve")
def _triangular_solve(ctx: Ctx, a: np.ndarray, b: np.ndarray, *, left_side: bool, lower: bool, transpose_a: bool,
                      conjugate_a: bool, unit_diagonal: bool, **_: Any) -> np.ndarray:
    def one(m: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray]:
        m = np.conj(m) if conjugate_a else m
        if left_side:  # op(a) x = b
            return (scipy.linalg.solve_triangular(m, rhs, lower=lower, trans=1 if transpose_a else 0,
                                                  unit_diagonal=unit_diagonal, check_finite=False),)
        # x op(a) = b  <=>  op(a)^T x^T = b^T
        xt = scipy.linalg.solve_triangular(m, rhs.T, lower=lower, trans=0 if transpose_a else 1,
                                           unit_diagonal=unit_diagonal, check_finite=False)
        return (xt.T,)
    return _batched(one, a, b)[0]


@register("lu")
def _lu(ctx: Ctx, a: np.ndarray, **_: Any) -> list[np.ndarray]:
    def one(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows, cols = m.shape
        k = min(rows, cols)
        if m.size == 0:
            lu, piv = m.copy(), np.zeros(k, np.int32)
        else:
            lu, piv = scipy.linalg.lu_factor(m, check_finite=False)
        perm = np.arange(rows)
        for i, p in enumerate(piv[:k]):
            perm[i], perm[p] = perm[p], perm[i]
        return lu, piv[:k].astype(np.int32), perm.astype(np.int32)
    return _batched(one, a)


@register("qr")
def _qr(ctx: Ctx, a: np.ndarray, *, full_matrices: bool, pivoting: bool = False, **_: Any) -> list[np.ndarray]:
    if pivoting:
        raise AmbiguousResult("pivoted QR: not implemented in the reference")
    return _batched(lambda m: np.linalg.qr(m, mode="complete" if full_matrices else "reduced"), a)


@register("svd")
def _svd(ctx: Ctx, a: np.ndarray, *, compute_uv: bool, full_matrices: bool = False, subset_by_index: Any = None,
         **_: Any) -> Any:
    lo, hi = subset_by_index if subset_by_index is not None else (0, min(a.shape[-2:]))
    if not compute_uv:
        return [_batched(lambda m: (np.linalg.svd(m, compute_uv=False),), a)[0][..., lo:hi]]
    u, s, vt = _batched(lambda m: np.linalg.svd(m, full_matrices=full_matrices), a)
    if subset_by_index is not None:
        s, u, vt = s[..., lo:hi], u[..., :, lo:hi], vt[..., lo:hi, :]
    return [s, u, vt]


@register("eigh")
def _eigh(ctx: Ctx, a: np.ndarray, *, lower: bool, sort_eigenvalues: bool = True, subset_by_index: Any = None,
          **_: Any) -> list[np.ndarray]:
    """(vectors, values), ascending; only the ``lower`` (or upper) triangle is read."""
    w, v = _batched(lambda m: np.linalg.eigh(m, UPLO="L" if lower else "U"), a)
    if subset_by_index is not None:
        lo, hi = subset_by_index
        w, v = w[..., lo:hi], v[..., :, lo:hi]
    return [v, w]


@register("eig")
def _eig(ctx: Ctx, a: np.ndarray, *, compute_left_eigenvectors: bool = True,
         compute_right_eigenvectors: bool = True, **_: Any) -> list[np.ndarray]:
    """[values, left vectors?, right vectors?] (their order is unspecified)."""
    def one(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w, vl, vr = scipy.linalg.eig(m, left=True, right=True, check_finite=False)
        return w.astype(np.complex128), vl.astype(np.complex128), vr.astype(np.complex128)
    w, vl, vr = _batched(one, a)
    return [w] + ([vl] if compute_left_eigenvectors else []) + ([vr] if compute_right_eigenvectors else [])


@register("fft")
def _fft(ctx: Ctx, x: np.ndarray, *, fft_type: Any, fft_lengths: tuple[int, ...], **_: Any) -> np.ndarray:
    kind = getattr(fft_type, "name", None) or {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}[int(fft_type)]
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if kind == "FFT":
        return np.fft.fftn(x, axes=axes)
    if kind == "IFFT":
        return np.fft.ifftn(x, axes=axes)
    if kind == "RFFT":
        return np.fft.rfftn(x, s=fft_lengths, axes=axes)
    return np.fft.irfftn(x, s=fft_lengths, axes=axes)


@register("tridiagonal_solve")
def _tridiagonal_solve(ctx: Ctx, dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray,
                       **_: Any) -> np.ndarray:
    """Solve with the tridiagonal matrix of diagonals ``dl`` (``dl[0]`` unused), ``d``
    and ``du`` (``du[-1]`` unused), for ``b`` of shape (..., m, n)."""
    def one(lo: np.ndarray, mid: np.ndarray, up: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray]:
        m = mid.shape[0]
        ab = np.zeros((3, m), dtype=np.result_type(lo, mid, up, rhs))
        ab[0, 1:], ab[1], ab[2, :-1] = up[:-1], mid, lo[1:]
        try:
            return (scipy.linalg.solve_banded((1, 1), ab, rhs, check_finite=False),)
        except (np.linalg.LinAlgError, ValueError):  # singular: no finite solution
            return (np.full(rhs.shape, np.nan, dtype=ab.dtype),)
    batch = d.shape[:-1]
    out = np.empty(b.shape, dtype=np.result_type(dl, d, du, b))
    for i in np.ndindex(*batch):
        out[i] = one(dl[i], d[i], du[i], b[i])[0]
    return out
