"""How close a result must be: the one tolerance of every comparison the judge makes.

``allowed(Computation(...))`` gives the band (``farm.judge.kernel.Allowed``) a result may lie
in around its reference. Its one input says what the band depends on: the result's dtype, the
kind of computation that made it (``KINDS``), its primitives (elementwise: the accuracy
table), how many terms a sum accumulates and their magnitudes, a solve's condition number,
the floor a harness declares for the platform, and whether two roundings are compared with
each other. The constructors name the common cases: ``of_harness`` (a catalog harness
against its hand-written reference, another platform's run or another host's outputs: a
limitation's ``tol`` for the platform, else the harness's own, else the dtype's default,
``farm.catalog.DEFAULT_TOL``; ``declared`` is the part the harness declares) and
``of_stored`` (a stored artifact's outputs). Below, the float64 reference's policy (kinds
``elementwise``, ``accumulating``, ``solve``); ``farm.judge.accumulation`` says why a sum's band
is what kind ``sum`` gives, ``farm.judge.gradients`` the derivatives'.

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
  computed in float64 (kind ``conditioned``); past a relative tolerance of 5% the comparison
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
  ``||A V - V diag(w)|| / ||A||`` must stay below ``16 * n * eps`` (kind ``invariant``),
  what a backward-stable algorithm guarantees with room to spare.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
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
#: its condition number, computed in float64 (kind ``conditioned``).
CONDITIONED = frozenset({"triangular_solve", "lu", "tridiagonal_solve", "cholesky"})

#: Past this relative tolerance a comparison says nothing: the problem is ill-conditioned
#: in the dtype, and the verdict is "none" with the condition number as the reason.
MEANINGLESS_RTOL = 0.05


#: epsilons allowed per kind of computation
ULPS = {"elementwise": 8, "accumulating": 64, "solve": 4096}



#: primitives that move, select or reinterpret values without rounding them: they do not make
#: a computation composite
EXACT_MOVES = frozenset({
    "broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "pjit", "jit", "closed_call", "copy",
    "copy_p", "select_n", "slice", "dynamic_slice", "concatenate", "rev", "pad", "neg", "abs", "sign", "floor",
    "ceil", "round", "is_finite", "max", "min", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "stop_gradient",
    "clamp", "nextafter", "real", "imag", "conj", "custom_jvp_call", "custom_vjp_call"})


#: How far a derivative computed in a dtype may be from another computation of it (the same
#: rules compiled apart, or a float64 finite difference), relative to the size of what was
#: summed: the values ``jax.test_util.check_grads`` holds derivatives to per dtype.
GRADIENT_TOL = {"bfloat16": 1e-1, "float16": 1e-2, "float32": 2e-3, "float64": 1e-5}

#: The kinds of computation ``allowed`` knows: the float64 reference's three
#: (``elementwise``, ``accumulating``, ``solve``), a solve's conditioning (``conditioned``), a
#: sum's or a product's rounding in any order (``sum``, ``product``), a derivative
#: (``gradient``), a residual of a non-unique result (``invariant``) and what a harness
#: declares (``declared``: against its hand-written reference, another platform, a stored
#: artifact).
KINDS = ("elementwise", "accumulating", "solve", "conditioned", "sum", "product", "gradient", "invariant",
         "declared")


@dataclass(frozen=True, slots=True)
class Computation:
    """What a result's tolerance depends on: the one input of ``allowed``."""

    dtype: Any  # the result's dtype (None for a derivative compared without a floor)
    kind: str = "elementwise"  # one of KINDS
    prims: frozenset[str] = frozenset()  # elementwise: the accuracy table's bounds of these primitives
    #: sum, product: the terms each element accumulates; invariant: the problem's size
    terms: int = 1
    #: accumulating, solve: the reference's max-norm (at least 1); sum, product: the terms'
    #: magnitudes per element (``Σ|x|``); gradient: the derivative's max-norm; two roundings: their norm
    magnitude: float | np.ndarray = 1.0
    cond: float | None = None  # conditioned: the matrix's condition number, computed in float64
    #: what the harness declares on this platform (its limitation's ``tol``, else its own): the
    #: floor under the reference's policy, the tolerance itself for ``declared``, ten times it
    #: for a statistical invariant
    floor: tuple[float, float] | None = None
    #: 2: two computations of the same value, each within the tolerance of the truth, compared
    #: with each other (a Pallas kernel and its jnp reference; a symbolic call and the static lowering)
    roundings: int = 1
    #: gradient: every dtype the derivative rounds in (its inputs' and cotangents'): the loosest
    #: sets rtol (float32's for none); ``dtype`` is then the one whose smallest normal is the floor
    dtypes: tuple[Any, ...] = ()


def allowed(c: Computation) -> Allowed:
    """The band a result of ``c`` may lie in around its reference (``farm.judge.kernel``):
    the one tolerance of every comparison the judge makes."""
    kind = c.kind
    if kind == "declared":
        rtol, atol = c.floor or DEFAULT_TOL.get(_name(c.dtype), (0.0, 0.0))
        return Allowed(c.roundings * rtol, c.roundings * atol)
    if kind == "invariant":
        bound = invariant_bound(c.dtype, c.terms)
        return Allowed(atol=max(bound, 10.0 * max(c.floor)) if c.floor is not None else bound)
    if kind == "gradient":
        rtol = max((GRADIENT_TOL.get(_name(d), GRADIENT_TOL["float32"]) for d in c.dtypes),
                   default=GRADIENT_TOL["float32"])
        return Allowed(rtol, rtol * c.magnitude + (_tiny(np.dtype(c.dtype)) if c.dtype is not None else 0.0))
    if kind == "conditioned":
        e = ULPS["accumulating"] * eps(c.dtype) * max(1.0, float(c.cond if c.cond is not None else 1.0))
        return Allowed(e, e)
    if kind in ("sum", "product"):
        k = max(c.terms - 1, 1) if kind == "product" else depth(c.terms)
        return Allowed(atol=k * (eps(c.dtype) / 2) * np.asarray(c.magnitude, dtype=np.float64))
    rtol, atol = _policy(c.dtype, kind, c.prims)
    if c.floor is not None:
        rtol, atol = max(rtol, c.floor[0]), max(atol, c.floor[1])
    if c.roundings > 1:  # two roundings of a max-norm result: each element within the bands' sum at the norm
        return Allowed(atol=c.roundings * (rtol + atol) * c.magnitude)
    dt = np.dtype(c.dtype)
    scale = c.magnitude if kind != "elementwise" else 1.0
    # a zero must have the reference's sign where the computation defines it
    zeros = kind == "elementwise" and dt.kind == "f" and not (c.prims & ZERO_SIGN_UNSPECIFIED)
    return Allowed(rtol, np.maximum(atol * scale, _tiny(dt)), signed_zeros=zeros)


def depth(terms: int) -> int:
    """Roundings on the longest path of a tree summation of ``terms`` products."""
    return math.ceil(math.log2(max(terms, 2))) + 1


def _name(dtype: Any) -> str:
    return dtype if isinstance(dtype, str) else np.dtype(dtype).name


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


def kind_of(primitives: set[str]) -> str:
    """The loosest kind of computation among ``primitives``."""
    if primitives & SOLVES:
        return "solve"
    return "accumulating" if primitives & ACCUMULATING else "elementwise"


def policy(c: Computation) -> dict[str, Any]:
    """The float64 reference's policy that a verdict was judged by, as recorded with it
    (before the harness's floor and a solve's conditioning)."""
    rtol, atol = _policy(c.dtype, c.kind, c.prims)
    exact = np.dtype(c.dtype).kind in "biu"
    k = 0 if exact else (elementwise_ulps(c.dtype, c.prims) if c.kind == "elementwise" else ULPS[c.kind])
    return {"dtype": np.dtype(c.dtype).name, "kind": c.kind, "ulps": k,
            "rtol": rtol, "atol": atol, "norm": "pointwise" if c.kind == "elementwise" else "max-norm of the reference",
            "exact": exact, **({"composite": composite(c.prims)} if c.kind == "elementwise" else {})}


def _policy(dtype: Any, kind: str, prims: frozenset[str]) -> tuple[float, float]:
    """The reference's (rtol, atol) for ``kind``: k epsilons (elementwise: the accuracy table's
    k, with an absolute band only for a composite), before any scaling or floor."""
    if kind == "elementwise":
        e = elementwise_ulps(dtype, prims) * eps(dtype)
        return e, (e if composite(prims) else 0.0)
    e = ULPS[kind] * eps(dtype)
    return e, e


def mismatches(ref: np.ndarray, got: np.ndarray, c: Computation) -> int:
    """How many elements of ``got`` disagree with the reference ``ref``."""
    return int(np.sum(bad_elements(ref, got, c)))


#: Primitives for which XLA leaves the sign of a zero result unspecified (max(-0.0, +0.0)).
ZERO_SIGN_UNSPECIFIED = frozenset({"max", "min", "reduce_max", "reduce_min", "clamp", "cummax", "cummin",
                                   "reduce_window_max", "reduce_window_min", "argmax", "argmin", "sort", "top_k"})


def errors(ref: np.ndarray, got: np.ndarray, c: Computation) -> dict[str, float]:
    """Max abs / relative / ULP error (NaN-, Inf- and exact-equality-aware) and mismatches."""
    dt = np.dtype(c.dtype)
    bad = bad_elements(ref, got, c)
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


def bad_elements(ref: np.ndarray, got: np.ndarray, c: Computation) -> np.ndarray:
    """A boolean mask of the elements of ``got`` that disagree with ``ref`` (all, if the
    shapes differ), by the one kernel (``farm.judge.kernel``) under ``allowed(c)``: the
    reference rounded to ``c.dtype`` first, a max-norm kind's band scaled by the reference's
    max-norm (at least 1)."""
    dt = np.dtype(c.dtype)
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return np.ones(max(got.size, ref.size, 1), dtype=bool)
    if dt.kind in "biu":
        return disagree(got, ref, dtype=dt)
    with np.errstate(all="ignore"):
        r = ref.astype(dt).astype(np.complex128 if dt.kind == "c" else np.float64)
        g = got.astype(np.complex128 if dt.kind == "c" else np.float64)
        if c.kind != "elementwise":
            c = replace(c, magnitude=float(np.max(np.abs(r[np.isfinite(r)]), initial=1.0)))
    return disagree(g, r, allowed(c))


def declared(h: Harness, platform: str) -> tuple[float, float] | None:
    """A tolerance the harness declares for this platform (a limitation's ``tol``, else its
    own), if any."""
    for lim in h.limitations:
        if lim.tol is not None and lim.applies(platform, h.dtype):
            return lim.tol
    return h.tol


def of_harness(h: Harness | None, platform: str, dtype: Any = None, roundings: int = 1) -> Computation:
    """A catalog harness's outputs of ``dtype`` (its own dtype if None) on ``platform``, held to
    what it declares, else the dtype's default (``farm.catalog.DEFAULT_TOL``); ``h`` None: a
    stored artifact whose harness left the catalog (the defaults)."""
    return Computation(dtype or (h.dtype if h is not None else ""), "declared",
                       floor=declared(h, platform) if h is not None else None, roundings=roundings)


def of_stored(expected: list[np.ndarray], h: Harness | None, platform: str, dtype: str | None = None) -> Computation:
    """A stored artifact's outputs, by the catalog's policy for its first output's dtype: its
    harness's own where it is still in the catalog, else the defaults."""
    return of_harness(h, platform, str(np.asarray(expected[0]).dtype) if len(expected) else dtype)


def rtol_atol(c: Computation) -> tuple[float, float]:
    """``allowed(c)`` as the (rtol, atol) pair a two-list comparison (``farm.judge.outputs``) takes."""
    a = allowed(c)
    return a.rtol, float(a.atol)
