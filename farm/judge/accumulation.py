"""The error a sum may carry: the rounding error model of accumulating computations.

A device may accumulate a sum at the operand's precision and in any order (XLA's CPU
backend sums bfloat16 in bfloat16), so its error grows with the number of terms and with
their magnitudes, not with the result: 32,674 normal bfloat16 values summing to about 50
come back as -21 from XLA CPU, a legitimate result whose sign is wrong. A tolerance
relative to the result (``farm.judge.tolerance``, kind ``accumulating``) cannot accept that
without accepting anything.

For an output computed directly by a sum (``reduce_sum``, ``cumsum``,
``reduce_window_sum``, ``dot_general``, ``conv_general_dilated``), each element may be off
by the classical bound of a tree-shaped summation of ``n`` terms, products included:

    |got - ref| <= (ceil(log2 n) + 1) * u * M,    u = eps(dtype) / 2,

where ``M`` is the same computation over the terms' magnitudes (``Σ|x|``; ``|A| @ |B|`` for
a contraction), evaluated in float64 by the same reference rule on ``|inputs|``. Blocked and
pairwise orders (XLA's CPU, GPU and TPU reductions) stay within it; a dropped or doubled
term larger than the band still fails. Where the band is wider than a term (long bfloat16
sums), no comparison of results can tell a dropped term from rounding: the band says so,
it does not hide it (``facts["accumulation"]``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from farm.judge.kernel import Allowed, disagree
from farm.judge.tolerance import Computation, allowed, depth
from farm.reference.evaluator import RULES, Ctx, Tap
from farm.reference.plan import CALLS

#: Primitives whose every output element is a sum of products of operand elements.
SUMS = frozenset({"reduce_sum", "cumsum", "reduce_window_sum", "dot_general", "conv_general_dilated"})
#: Primitives whose every output element is a product of operand elements: n - 1 roundings in
#: any order, each relative; and where some order's partial products both overflow and
#: underflow the dtype, the result depends on the order (inf * 0 is NaN).
PRODUCTS = frozenset({"reduce_prod"})
ACCUMULATING = SUMS | PRODUCTS


@dataclass(frozen=True)
class Band:
    """The per-element error band of one output and what it was made from."""

    primitive: str
    terms: int
    band: np.ndarray
    #: elements whose value depends on the order of a product's partial products (None: none)
    order_dependent: np.ndarray | None = None

    def facts(self) -> dict[str, Any]:
        out = {"primitive": self.primitive, "terms": self.terms, "depth": depth(self.terms),
               "max_band": float(np.max(self.band, initial=0.0))}
        if self.order_dependent is not None and self.order_dependent.any():
            out["order_dependent"] = int(self.order_dependent.sum())
        return out


def producers(jaxpr: Any) -> dict[int, Any]:
    """{output index: the summing equation that computes it}, through calls (``pjit``)."""
    made: dict[Any, Any] = {}
    _walk(jaxpr, made)
    return {i: made[v] for i, v in enumerate(jaxpr.outvars) if type(v).__name__ != "Literal" and v in made}


def _walk(jaxpr: Any, made: dict[Any, Any]) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr")) if name in CALLS else None
        if sub is not None:
            inner = getattr(sub, "jaxpr", sub)
            _walk(inner, made)
            for v, w in zip(eqn.outvars, inner.outvars):
                if type(w).__name__ != "Literal" and w in made:
                    made[v] = made[w]
        elif name in ACCUMULATING:
            made[eqn.outvars[0]] = eqn


def terms(eqn: Any, ins: tuple[np.ndarray, ...]) -> int:
    """How many products each output element of ``eqn`` sums."""
    name, p = eqn.primitive.name, eqn.params
    if name in ("reduce_sum", "reduce_prod"):
        return int(np.prod([ins[0].shape[a] for a in p["axes"]], dtype=np.int64))
    if name == "cumsum":
        return int(ins[0].shape[p["axis"]])
    if name == "reduce_window_sum":
        return int(np.prod(p["window_dimensions"], dtype=np.int64))
    if name == "dot_general":
        (lc, _), _ = p["dimension_numbers"]
        return int(np.prod([ins[0].shape[d] for d in lc], dtype=np.int64))
    rhs_spec = p["dimension_numbers"].rhs_spec  # conv: (out features, in features, spatial...)
    return int(np.prod([ins[1].shape[d] for d in rhs_spec[1:]], dtype=np.int64))


def band(eqn: Any, tap: Tap) -> Band | None:
    """The error band of ``eqn``'s output (None for integers, or a sum seen more than once)."""
    out = np.dtype(eqn.outvars[0].aval.dtype)
    if tap.calls != 1 or out.kind not in "fcV":
        return None
    ctx = Ctx(eqn.primitive.name, tuple(v.aval for v in eqn.invars), tuple(v.aval for v in eqn.outvars))
    with np.errstate(all="ignore"):
        magnitude = np.abs(np.asarray(RULES[eqn.primitive.name](ctx, *[np.abs(x) for x in tap.ins], **eqn.params)))
    n = terms(eqn, tap.ins)
    kind = "product" if eqn.primitive.name in PRODUCTS else "sum"
    width = np.asarray(allowed(Computation(out, kind, terms=n, magnitude=magnitude)).atol)
    real = np.dtype(np.float32 if out == np.complex64 else np.float64) if out.kind == "c" else out
    fi = ml_dtypes.finfo(real)
    if kind == "product":
        return Band(eqn.primitive.name, n, width,
                    _order_dependent(np.abs(tap.ins[0]), eqn.params["axes"], float(fi.max), float(fi.tiny)))
    # a sum whose terms' magnitudes add up past the largest finite value: an order that adds the
    # large terms of one sign first overflows (max + max - max is inf in float32, max in float64)
    return Band(eqn.primitive.name, n, width, np.asarray(_past(eqn, ctx, tap, magnitude) > float(fi.max)))


def _past(eqn: Any, ctx: Ctx, tap: Tap, magnitude: np.ndarray) -> np.ndarray:
    """A sum's terms' magnitudes where every term is finite (elsewhere 0: an infinite term makes the
    result the same in every order), in long double where float64's own range is too small for them."""
    with np.errstate(all="ignore"):
        wide = magnitude
        if not np.all(np.isfinite(magnitude)) and np.finfo(np.longdouble).max > np.finfo(np.float64).max:
            try:
                wide = np.abs(np.asarray(RULES[eqn.primitive.name](
                    ctx, *[np.abs(x).astype(np.longdouble) for x in tap.ins], **eqn.params)))
            except Exception:  # a rule that takes no long double: float64's magnitudes
                wide = magnitude
        return np.where(np.isfinite(wide), wide, 0.0)


def _order_dependent(mag: np.ndarray, axes: tuple[int, ...], top: float, tiny: float) -> np.ndarray:
    """Per output element of a product of finite factors: some order's partial product leaves the
    dtype's range while another's does not. An order that multiplies the factors above 1 first
    overflows (and then inf * 0 is NaN where a factor is zero), one that multiplies those below 1
    first underflows to zero (where no factor is zero: with one, the product is zero in every
    order that does not overflow). An infinite factor makes the result the same in every order."""
    with np.errstate(all="ignore"):
        m = mag.astype(np.float64)
        logs = np.log2(np.where((m == 0) | ~np.isfinite(m), 1.0, m))
        up = np.sum(np.where(logs > 0, logs, 0.0), axis=tuple(axes))
        down = np.sum(np.where(logs < 0, logs, 0.0), axis=tuple(axes))
        zero = np.any(m == 0, axis=tuple(axes))
        infinite = np.any(np.isinf(m), axis=tuple(axes))
    over, under = up > math.log2(top), down < math.log2(tiny)
    return ~infinite & (over | (under & ~zero))


def within(got: np.ndarray, ref: np.ndarray, b: Band) -> np.ndarray:
    """The elements of ``got`` that the band accepts (``farm.judge.kernel``: within it, or
    the reference's own value), or, where a sum's or a product's value depends on its order, what an
    overflow or underflow on the way makes of it (±inf, ±0, NaN)."""
    g = np.asarray(got).astype(np.complex128 if np.iscomplexobj(got) else np.float64)
    r = np.asarray(ref).astype(g.dtype)
    ok = ~disagree(g, r, Allowed(atol=b.band))
    if b.order_dependent is not None:
        with np.errstate(all="ignore"):
            ok |= b.order_dependent & (np.isnan(g) | np.isinf(g) | (g == 0))
    return ok
