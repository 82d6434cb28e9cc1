"""How close a result must be: the one tolerance lookup of every verdict.

- ``harness_tolerance(h, platform, dtype)``: the (rtol, atol) a catalog harness is compared
  with against its hand-written reference, another platform's run or another host's
  outputs: a limitation's ``tol`` for the platform, else the harness's own, else the
  dtype's default (``farm.catalog.DEFAULT_TOL``); ``declared`` is the part the harness
  itself declares (the floor under the jaxpr reference's policy below);
- ``stored_tolerance``: a stored artifact's outputs, by its harness's lookup where it is
  still in the catalog;
- ``invariant_limit``: the one bound every invariant check is held to;
- below: the float64 reference's policy (``policy``, ``tolerance``, ``bad_elements``).

Every verdict of the jaxpr reference records the policy it was judged by (``policy()``).

- **Rounding first.** The reference is rounded to the dtype the jaxpr promised (a float64
  value past float32's range becomes ±Inf, as on the device).
- **Exact where the result is exact.** Integers and bools must be equal (wrap-around,
  shifts and division as XLA defines them); NaN matches NaN (any payload), an infinity
  the same infinity; for elementwise results a zero must have the reference's sign.
- **ULP-based for elementwise math** (``kind="elementwise"``), from the measured accuracy
  table (``farm.catalog.ulps``, docs/accuracy.md): k = the table's bound in ULP of the
  least accurate primitive of the computation for the output dtype (``DEFAULT`` = 2 for
  one it does not name: IEEE arithmetic), per element ``|got - ref| <= k*eps*|ref|``
  (eps*|ref| is between one and two ULP of ref). A single primitive gets no absolute band
  beyond the dtype's smallest normal, so a result computed at a lower precision than its
  dtype fails, half precisions included; a composite (two or more primitives that round)
  adds ``k*eps`` absolute, since an intermediate's rounding error propagates absolutely
  (``x*y + z`` near cancellation).
- **Norm-based where the device accumulates** (sums, products, dot, convolution, scans,
  FFT, decompositions: ``kind="accumulating"``, k = 64) and rounding order differs:
  ``|got - ref| <= k*eps*max|ref| + k*eps*|ref|``, i.e. relative to the max-norm of the
  reference. **Linear solves and factorizations** err by cond(A)*eps: where the reference
  sees the matrix (cholesky, lu, triangular and tridiagonal solves) k = 64 * cond(A),
  computed in float64 (``conditioned``); past a relative tolerance of 5% the comparison
  is meaningless and the verdict is "none: ill-conditioned"; where it does not
  (``custom_linear_solve``) a fixed k = 4096 bounds cond <= ~4096.
- **Subnormals may be flushed.** A device may treat subnormal inputs and results as
  zeros of the same sign (XLA's CPU backend does for float32, bfloat16 and float64): an
  element matching either the IEEE reference or the reference evaluated with flushing
  (``farm.reference.evaluator.flushing_subnormals``) agrees. Values below the dtype's
  smallest normal count as zero in the tolerance.
- **Unspecified signs of zero.** max/min and their reductions may return either zero
  (``ZERO_SIGN_UNSPECIFIED``).
- **Invariants for non-unique results** (eigen/singular vectors, QR signs, eig's order,
  an unstable sort's ties, an approximate top-k): a residual such as
  ``||A V - V diag(w)|| / ||A||`` must stay below ``16 * n * eps`` (``invariant_bound``),
  what a backward-stable algorithm guarantees with room to spare.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes  # noqa: F401
import numpy as np

from farm.catalog import DEFAULT_TOL, Harness, ulps
from farm.judge.kernel import Allowed, disagree
from farm.reference.invariants import eps, invariant_bound

#: Primitives whose device results accumulate rounding in an order the reference does not follow.
ACCUMULATING = frozenset({
    "dot_general", "conv_general_dilated", "reduce_sum", "reduce_prod", "cumsum", "cumprod", "cumlogsumexp",
    "reduce_window_sum", "reduce_window", "reduce", "scatter-add", "scatter-sub", "scatter-mul",
    "select_and_scatter_add", "custom_linear_solve", "triangular_solve", "cholesky", "lu", "qr", "svd", "fft",
    "eigh", "eig", "schur",
    "pow", "integer_pow",
    "igamma", "igammac", "regularized_incomplete_beta", "lgamma", "digamma", "erf_inv",
})

#: Primitives that solve linear systems: the device's error grows with the condition number
#: of the matrix (cond(A) * eps), which a fixed tolerance can only bound (here: cond <= ~4096).
SOLVES = frozenset({"triangular_solve", "custom_linear_solve", "lu", "tridiagonal_solve", "cholesky"})

#: Solves and factorizations whose matrix the reference sees: their tolerance is scaled by
#: its condition number, computed in float64 (``conditioned``).
CONDITIONED = frozenset({"triangular_solve", "lu", "tridiagonal_solve", "cholesky"})

#: Past this relative tolerance a comparison says nothing: the problem is ill-conditioned
#: in the dtype, and the verdict is "none" with the condition number as the reason.
MEANINGLESS_RTOL = 0.05


def conditioned(dtype: Any, cond: float) -> tuple[float, float]:
    """(rtol, atol) for a solve or factorization of a matrix with condition number ``cond``:
    the forward error of a backward-stable algorithm is about cond * eps."""
    e = ULPS["accumulating"] * eps(dtype) * max(1.0, float(cond))
    return e, e

#: epsilons allowed per kind of computation
ULPS = {"elementwise": 8, "accumulating": 64, "solve": 4096}



#: primitives that move, select or reinterpret values without rounding them: they do not make
#: a computation composite
EXACT_MOVES = frozenset({
    "broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "pjit", "jit", "closed_call", "copy",
    "copy_p", "select_n", "slice", "dynamic_slice", "concatenate", "rev", "pad", "neg", "abs", "sign", "floor",
    "ceil", "round", "is_finite", "max", "min", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "stop_gradient",
    "clamp", "nextafter", "real", "imag", "conj", "custom_jvp_call", "custom_vjp_call"})


def elementwise_ulps(dtype: Any, prims: frozenset[str] | set[str] = frozenset()) -> float:
    """k for an elementwise computation of ``prims`` with results of ``dtype``: the table's
    bound of its least accurate primitive (at least ``ulps.DEFAULT``)."""
    name = np.dtype(dtype).name
    if np.dtype(dtype).kind == "c":
        name = "float32" if np.dtype(dtype).itemsize == 8 else "float64"
    found = [b for b in (ulps.bound(p, name) for p in prims) if b is not None]
    return max([float(ulps.DEFAULT), *found])


def composite(prims: frozenset[str] | set[str]) -> bool:
    """Two or more primitives that round: an intermediate's error propagates absolutely."""
    return len(set(prims) - EXACT_MOVES) > 1


def policy(dtype: Any, kind: str, prims: frozenset[str] | set[str] | None = None) -> dict[str, Any]:
    """The tolerance a verdict was judged by, as recorded with it."""
    rtol, atol = tolerance(dtype, kind, prims)
    exact = np.dtype(dtype).kind in "biu"
    k = 0 if exact else (elementwise_ulps(dtype, prims or frozenset()) if kind == "elementwise" else ULPS[kind])
    return {"dtype": np.dtype(dtype).name, "kind": kind, "ulps": k,
            "rtol": rtol, "atol": atol, "norm": "pointwise" if kind == "elementwise" else "max-norm of the reference",
            "exact": exact, **({"composite": composite(prims or frozenset())} if kind == "elementwise" else {})}


def invariant_limit(dtype: Any, n: int, declared: tuple[float, float] | None = None) -> float:
    """The one bound every invariant check is held to (the reference's invariants, a catalog
    harness's own invariant, two decompositions' outputs compared by the operand they
    describe): ``invariant_bound``, or ten times a tolerance the harness declares where that
    is looser (a statistical invariant, such as a random generator's moments, is not a
    rounding error)."""
    bound = invariant_bound(dtype, n)
    if declared is not None:
        bound = max(bound, 10.0 * max(declared))
    return bound


def kind_of(primitives: set[str]) -> str:
    """The loosest kind of computation among ``primitives``."""
    if primitives & SOLVES:
        return "solve"
    return "accumulating" if primitives & ACCUMULATING else "elementwise"


def tolerance(dtype: Any, kind: str = "elementwise", prims: frozenset[str] | set[str] | None = None) -> tuple[float, float]:
    """(rtol, atol) for results of ``dtype``; atol is scaled later by the reference's magnitude
    (elementwise: an atol of 0 means none beyond the dtype's smallest normal). ``prims``: the
    computation's primitives (elementwise: their bounds in the accuracy table)."""
    if kind != "elementwise":
        e = ULPS[kind] * eps(dtype)
        return e, e
    e = elementwise_ulps(dtype, prims or frozenset()) * eps(dtype)
    return e, (e if composite(prims or frozenset()) else 0.0)


def mismatches(ref: np.ndarray, got: np.ndarray, dtype: Any, kind: str = "elementwise",
               prims: frozenset[str] | set[str] | None = None) -> int:
    """How many elements of ``got`` (of ``dtype``) disagree with the reference ``ref``."""
    return int(np.sum(bad_elements(ref, got, dtype, kind, prims=prims)))


#: Primitives for which XLA leaves the sign of a zero result unspecified (max(-0.0, +0.0)).
ZERO_SIGN_UNSPECIFIED = frozenset({"max", "min", "reduce_max", "reduce_min", "clamp", "cummax", "cummin",
                                   "reduce_window_max", "reduce_window_min", "argmax", "argmin", "sort", "top_k"})


def errors(ref: np.ndarray, got: np.ndarray, dtype: Any, kind: str = "elementwise",
           floor: tuple[float, float] | None = None, signed_zeros: bool = True,
           prims: frozenset[str] | set[str] | None = None) -> dict[str, float]:
    """Max abs / relative / ULP error (NaN-, Inf- and exact-equality-aware) and mismatches."""
    dt = np.dtype(dtype)
    bad = bad_elements(ref, got, dtype, kind, floor, signed_zeros, prims)
    if np.shape(got) != np.shape(ref) or np.size(got) == 0:
        return {"max_abs_err": 0.0 if np.size(got) == 0 else float("inf"), "max_rel_err": 0.0,
                "max_ulp_err": 0.0, "mismatches": float(np.sum(bad))}
    wide = np.complex128 if dt.kind == "c" else np.float64
    with np.errstate(all="ignore"):
        r = np.asarray(ref).astype(dt).astype(wide) if dt.kind not in "biu" else np.asarray(ref).astype(np.float64)
        g = np.asarray(got).astype(wide) if dt.kind not in "biu" else np.asarray(got).astype(np.float64)
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        diff = np.where(same, 0.0, np.abs(g - r))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = np.where(diff == 0, 0.0, diff / np.abs(r))
        e = eps(dt)
        ulp = diff / (e * np.maximum(np.abs(r), _tiny(dt))) if e else np.where(diff == 0, 0.0, np.inf)
    return {"max_abs_err": float(diff.max()), "max_rel_err": float(np.nanmax(rel)),
            "max_ulp_err": float(np.nanmax(ulp)), "mismatches": float(np.sum(bad))}


def _tiny(dt: np.dtype) -> float:
    return float(ml_dtypes.finfo(dt if dt.kind != "c" else (np.float32 if dt.itemsize == 8 else np.float64)).tiny)


def bad_elements(ref: np.ndarray, got: np.ndarray, dtype: Any, kind: str = "elementwise",
                 floor: tuple[float, float] | None = None, signed_zeros: bool = True,
                 prims: frozenset[str] | set[str] | None = None) -> np.ndarray:
    """A boolean mask of the elements of ``got`` that disagree with ``ref`` (all, if the
    shapes differ), by the one kernel (``farm.judge.kernel``) under the policy's band: the
    reference rounded to ``dtype`` first, atol scaled by the reference's max-norm where the
    device accumulates, never under the dtype's smallest normal. ``floor``: a harness's
    declared (rtol, atol) for this platform (TF32 on cuda...), used where it is looser than
    the policy."""
    dt = np.dtype(dtype)
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return np.ones(max(got.size, ref.size, 1), dtype=bool)
    if dt.kind in "biu":
        return disagree(got, ref, dtype=dt)
    with np.errstate(all="ignore"):
        r = ref.astype(dt).astype(np.complex128 if dt.kind == "c" else np.float64)
        g = got.astype(np.complex128 if dt.kind == "c" else np.float64)
        rtol, atol = tolerance(dt, kind, prims)
        if floor is not None:
            rtol, atol = max(rtol, floor[0]), max(atol, floor[1])
        scale = float(np.max(np.abs(r[np.isfinite(r)]), initial=1.0)) if kind != "elementwise" else 1.0
    # a zero must have the reference's sign where the computation defines it
    zeros = signed_zeros and kind == "elementwise" and dt.kind == "f"
    return disagree(g, r, Allowed(rtol, np.maximum(atol * scale, _tiny(dt)), signed_zeros=zeros))


def declared(h: Harness, platform: str) -> tuple[float, float] | None:
    """A tolerance the harness declares for this platform (a limitation's ``tol``, else its
    own), if any."""
    for lim in h.limitations:
        if lim.tol is not None and lim.applies(platform, h.dtype):
            return lim.tol
    return h.tol


def harness_tolerance(h: Harness, platform: str, dtype: str | None = None) -> tuple[float, float]:
    """(rtol, atol) for a harness's outputs of ``dtype`` (its own dtype if None) on ``platform``:
    what it declares, else the dtype's default."""
    return declared(h, platform) or DEFAULT_TOL.get(dtype or h.dtype, (0.0, 0.0))


def own_reference_tolerance(h: Harness, platform: str) -> tuple[float, float]:
    """(rtol, atol) between a Pallas kernel and the jnp reference it ships: two computations of
    the same math in the kernel's dtype, each allowed the harness's tolerance from the truth,
    may differ by twice it (the triangle inequality)."""
    rtol, atol = harness_tolerance(h, platform)
    return 2 * rtol, 2 * atol


def stored_tolerance(expected: list[np.ndarray], h: Harness | None, platform: str,
                     dtype: str | None = None) -> tuple[float, float]:
    """(rtol, atol) for a stored artifact's outputs, by the catalog's policy for its first
    output's dtype: its harness's own where it is still in the catalog, else the defaults."""
    first = str(np.asarray(expected[0]).dtype) if len(expected) else dtype
    if h is not None:
        return harness_tolerance(h, platform, first)
    return DEFAULT_TOL.get(first or "", (0.0, 0.0))


#: How far a derivative computed in a dtype may be from another computation of it (the same
#: rules compiled apart, or a float64 finite difference), relative to the size of what was
#: summed: the values ``jax.test_util.check_grads`` holds derivatives to per dtype.
GRADIENT_TOL = {"bfloat16": 1e-1, "float16": 1e-2, "float32": 2e-3, "float64": 1e-5}


def gradient_tolerance(dtypes: Any) -> float:
    """The loosest ``GRADIENT_TOL`` of some floating dtypes (a harness that mixes float16 and
    float32 is as precise as its float16 part); float32's for none the table names."""
    known = [GRADIENT_TOL.get(np.dtype(d).name if not isinstance(d, str) else d, GRADIENT_TOL["float32"])
             for d in dtypes]
    return max(known, default=GRADIENT_TOL["float32"])
