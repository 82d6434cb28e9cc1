"""Elementwise rules: math, comparisons, bitwise ops, shifts, integer division,
conversions, select_n, clamp, nextafter, powers and the special functions.

Floats are evaluated in float64 (complex in complex128); integers in their own dtype,
so wrap-around matches the device. Explicit conversions round to the promised dtype.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes  # noqa: F401  (registers bfloat16 & co. with NumPy)
import numpy as np
import scipy.special as sp
from jax._src import lax_reference

from farm.reference.evaluator import Ctx, UnsupportedPrimitive, is_float, register


def _unary(names: str, fn: Any) -> None:
    for name in names.split():
        register(name)(lambda ctx, x, _fn=fn, **_: _fn(x))


def _binary(names: str, fn: Any) -> None:
    for name in names.split():
        register(name)(lambda ctx, x, y, _fn=fn, **_: _fn(x, y))


# -------------------------------------------------------------- plain math
_unary("neg", np.negative)
_unary("floor", np.floor)
_unary("ceil", np.ceil)
_unary("is_finite", np.isfinite)
_unary("exp", np.exp)
_unary("exp2", np.exp2)
_unary("log", np.log)
_unary("log1p", np.log1p)
_unary("expm1", np.expm1)
_unary("tanh", np.tanh)
_unary("sin", np.sin)
_unary("cos", np.cos)
_unary("tan", np.tan)
_unary("asin", np.arcsin)
_unary("acos", np.arccos)
_unary("atan", np.arctan)
_unary("sinh", np.sinh)
_unary("cosh", np.cosh)
_unary("asinh", np.arcsinh)
_unary("acosh", np.arccosh)
_unary("atanh", np.arctanh)
_unary("sqrt", np.sqrt)
_unary("rsqrt", lambda x: 1 / np.sqrt(x))
_unary("cbrt", np.cbrt)
_unary("square", np.square)
_unary("logistic", lambda x: 1 / (1 + np.exp(-x)))
_unary("abs", np.abs)  # integers wrap: abs(INT_MIN) == INT_MIN, as on the device
_unary("real", np.real)
_unary("imag", np.imag)
_unary("conj", lambda x: np.conj(x.astype(np.complex128)))
_binary("add add_any", np.add)
_binary("sub", np.subtract)
_binary("mul", np.multiply)
_binary("atan2", np.arctan2)
def _complex(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + iy built part by part: ``x + 1j * y`` makes the real part NaN where y is infinite
    (1j * inf is nan + inf j), found by the edge-values check."""
    x, y = np.broadcast_arrays(x, y)
    out = np.empty(x.shape, np.complex128)
    out.real, out.imag = x, y
    return out


_binary("complex", _complex)

# -------------------------------------------------------------- special functions (SciPy)
_unary("erf", sp.erf)
_unary("erfc", sp.erfc)
_unary("erf_inv", sp.erfinv)
_unary("lgamma", sp.gammaln)
_unary("digamma", sp.digamma)
_unary("bessel_i0e", sp.i0e)
_unary("bessel_i1e", sp.i1e)
_binary("igamma", sp.gammainc)
_binary("igammac", sp.gammaincc)
def _polygamma(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """ψ⁽ᵐ⁾(x) for a non-negative integer order, NaN for any other (as JAX defines it; the
    order truncated to an integer once judged polygamma(1e-38, x) as digamma, found by the
    edge-values check)."""
    m, x = np.broadcast_arrays(np.asarray(m, np.float64), np.asarray(x, np.float64))
    whole = np.isfinite(m) & (m >= 0) & (m == np.floor(m))
    out = sp.polygamma(np.where(whole, m, 0).astype(int), x)
    return np.where(whole, out, np.nan)


_binary("polygamma", _polygamma)
_binary("zeta", sp.zeta)
register("regularized_incomplete_beta")(lambda ctx, a, b, x, **_: sp.betainc(a, b, x))

# -------------------------------------------------------------- bit counting
def _population_count(x: np.ndarray) -> np.ndarray:
    """Set bits of the value's own width. (``lax_reference.population_count`` sign-extends
    int8/int16 to int32 first, so it counts 32 for int16 -1: not used for that reason.)"""
    u = np.array(x, order="C").view(f"uint{x.dtype.itemsize * 8}")  # 0-d stays 0-d (ascontiguousarray makes it 1-d)
    bytes_ = u[..., None].view(np.uint8)
    return np.unpackbits(bytes_, axis=-1).sum(axis=-1).astype(x.dtype)


_unary("population_count", _population_count)
_unary("clz", lambda x: np.asarray(lax_reference.clz(np.atleast_1d(x))).reshape(np.shape(x)))  # jax._src.lax_reference's
# (tested on narrow and wide types), which assigns into its operand: a scalar goes in as one element


@register("sign")
def _sign(ctx: Ctx, x: np.ndarray, **_: Any) -> np.ndarray:
    if np.iscomplexobj(x):
        mag = np.abs(x)
        return np.where(mag == 0, 0, x / np.where(mag == 0, 1, mag))
    if is_float(ctx.in_dtype):
        return np.where(x == 0, x, np.sign(x))  # keeps -0.0 and NaN
    return np.sign(x)


@register("round")
def _round(ctx: Ctx, x: np.ndarray, *, rounding_method: Any = 0, **_: Any) -> np.ndarray:
    if int(rounding_method) == 1:  # TO_NEAREST_EVEN
        return np.rint(x)
    return np.where(np.isfinite(x), np.copysign(np.floor(np.abs(x) + 0.5), x), x)  # AWAY_FROM_ZERO


@register("integer_pow")
def _integer_pow(ctx: Ctx, x: np.ndarray, *, y: int, **_: Any) -> np.ndarray:
    if not (is_float(ctx.in_dtype) or np.iscomplexobj(x)):
        acc = np.ones_like(x)  # repeated multiplication wraps in the integer dtype
        base, n = x.copy(), y
        while n > 0:
            if n & 1:
                acc = acc * base
            base = base * base
            n >>= 1
        return acc
    return np.power(x, float(y)) if not np.iscomplexobj(x) else np.power(x, y)


@register("pow")
def _pow(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    if np.issubdtype(y.dtype, np.integer):
        y = y.astype(np.float64)
    return np.power(x, y)


# -------------------------------------------------------------- comparisons, max/min
def _lex(x: np.ndarray, y: np.ndarray, op: Any) -> np.ndarray:
    """Complex values compare lexicographically (real, then imaginary), as XLA does."""
    return np.where(x.real == y.real, op(x.imag, y.imag), op(x.real, y.real))


_binary("eq", np.equal)
_binary("ne", np.not_equal)
for _name, _op in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
    register(_name)(lambda ctx, x, y, _op=_op, **_: _lex(x, y, _op) if np.iscomplexobj(x) else _op(x, y))


@register("max")
def _max(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    if np.iscomplexobj(x):
        return np.where(_lex(x, y, np.greater), x, y)
    return np.maximum(x, y)  # NaN propagates


@register("min")
def _min(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    if np.iscomplexobj(x):
        return np.where(_lex(x, y, np.less), x, y)
    return np.minimum(x, y)


@register("clamp")
def _clamp(ctx: Ctx, lo: np.ndarray, x: np.ndarray, hi: np.ndarray, **_: Any) -> np.ndarray:
    if np.iscomplexobj(x):
        mx = np.where(_lex(x, lo, np.greater), x, lo)
        return np.where(_lex(mx, hi, np.less), mx, hi)
    return np.minimum(np.maximum(x, lo), hi)


@register("select_n")
def _select_n(ctx: Ctx, which: np.ndarray, *cases: np.ndarray, **_: Any) -> np.ndarray:
    which = which.astype(np.int64)
    shape = np.broadcast_shapes(which.shape, *(c.shape for c in cases))
    return np.choose(np.broadcast_to(which, shape), [np.broadcast_to(c, shape) for c in cases])


# -------------------------------------------------------------- bitwise and shifts
def _logical_or_bitwise(logical: Any, bitwise: Any) -> Any:
    return lambda x, y: logical(x, y) if x.dtype == np.bool_ else bitwise(x, y)


_binary("and", _logical_or_bitwise(np.logical_and, np.bitwise_and))
_binary("or", _logical_or_bitwise(np.logical_or, np.bitwise_or))
_binary("xor", _logical_or_bitwise(np.logical_xor, np.bitwise_xor))
_unary("not", lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x))


def _unsigned(dt: np.dtype) -> np.dtype:
    return np.dtype(f"uint{dt.itemsize * 8}")


def _signed(dt: np.dtype) -> np.dtype:
    return np.dtype(f"int{dt.itemsize * 8}")


@register("shift_left")
def _shift_left(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    n = y.astype(_unsigned(y.dtype))  # a negative amount is a huge unsigned one
    ok = n < bits
    ux = x.view(_unsigned(x.dtype))
    return np.where(ok, np.left_shift(ux, np.where(ok, n, 0).astype(ux.dtype)), 0).astype(ux.dtype).view(x.dtype)


@register("shift_right_logical")
def _shift_right_logical(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    n = y.astype(_unsigned(y.dtype))
    ok = n < bits
    ux = x.view(_unsigned(x.dtype))
    return np.where(ok, np.right_shift(ux, np.where(ok, n, 0).astype(ux.dtype)), 0).astype(ux.dtype).view(x.dtype)


@register("shift_right_arithmetic")
def _shift_right_arithmetic(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    n = y.astype(_unsigned(y.dtype))
    n = np.minimum(n, bits - 1).astype(_signed(x.dtype))  # past the width: all sign bits
    sx = x.view(_signed(x.dtype))
    return np.right_shift(sx, n).astype(sx.dtype).view(x.dtype)


# -------------------------------------------------------------- division
@register("div")
def _div(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    if is_float(ctx.in_dtype) or np.iscomplexobj(x):
        return np.true_divide(x, y)
    x, y = np.broadcast_arrays(x, y)
    zero = y == 0
    signed = np.issubdtype(x.dtype, np.signedinteger)
    overflow = (x == np.iinfo(x.dtype).min) & (y == -1) if signed else np.zeros(x.shape, bool)
    safe = np.where(zero | overflow, 1, y).astype(x.dtype)
    q = np.floor_divide(x, safe)
    if signed:  # truncate toward zero
        q = np.where((np.remainder(x, safe) != 0) & ((x < 0) != (safe < 0)), q + 1, q)
    q = np.where(overflow, x, q)  # INT_MIN / -1 == INT_MIN
    return np.where(zero, np.array(-1).astype(x.dtype), q).astype(x.dtype)  # x / 0 == -1 (all ones)


@register("rem")
def _rem(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    if is_float(ctx.in_dtype):
        return np.fmod(x, y)  # the sign of the dividend
    if np.iscomplexobj(x):
        raise UnsupportedPrimitive("rem[complex]")
    x, y = np.broadcast_arrays(x, y)
    zero = y == 0
    safe = np.where(zero | (y == -1) if np.issubdtype(x.dtype, np.signedinteger) else zero, 1, y).astype(x.dtype)
    r = np.fmod(x, safe)  # x % -1 == 0, computed as x % 1 (avoids INT_MIN % -1)
    return np.where(zero, x, r).astype(x.dtype)  # x % 0 == x


# -------------------------------------------------------------- conversions
@register("convert_element_type")
def _convert(ctx: Ctx, x: np.ndarray, *, new_dtype: Any, **_: Any) -> np.ndarray:
    return convert(x, ctx.in_dtype, np.dtype(new_dtype))


def convert(x: np.ndarray, src: np.dtype, dst: np.dtype) -> np.ndarray:
    """``convert_element_type`` from ``src`` to ``dst`` on a reference-dtype value."""
    if dst == np.bool_:
        return x != 0
    src_complex = np.issubdtype(src, np.complexfloating)
    if np.issubdtype(dst, np.integer):
        if src_complex:
            x = x.real
        if is_float(src) or src_complex:  # truncate toward zero, NaN -> 0, saturate
            info = np.iinfo(dst)
            t = np.trunc(np.where(np.isnan(x), 0, x))
            # compare in float64, where int64's max rounds up to 2**63: at or past it saturates
            hi, lo = t >= float(info.max), t <= float(info.min)
            safe = np.where(hi | lo, 0, t).astype(dst)
            return np.where(hi, info.max, np.where(lo, info.min, safe)).astype(dst)
        return x.astype(dst)  # integers and bool wrap
    if np.issubdtype(dst, np.complexfloating):
        return x.astype(dst).astype(np.complex128)
    if src_complex:
        x = x.real
    return np.asarray(x, dtype=np.float64).astype(dst).astype(np.float64)  # round to the narrower float


@register("bitcast_convert_type")
def _bitcast(ctx: Ctx, x: np.ndarray, *, new_dtype: Any, **_: Any) -> np.ndarray:
    src, dst = ctx.in_dtype, np.dtype(new_dtype)
    raw = np.array(x.astype(src), copy=True, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if src.itemsize == dst.itemsize:
        return raw.view(dst).reshape(raw.shape)
    if src.itemsize > dst.itemsize:
        return raw.view(dst).reshape(raw.shape + (src.itemsize // dst.itemsize,))
    return raw.view(dst).reshape(raw.shape[:-1])


@register("reduce_precision")
def _reduce_precision(ctx: Ctx, x: np.ndarray, *, exponent_bits: int, mantissa_bits: int, **_: Any) -> np.ndarray:
    return reduce_precision(x, exponent_bits, mantissa_bits)


def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's ReducePrecision on float64 bits: round to nearest even in ``mantissa_bits``,
    then overflow to ±Inf and flush to ±0 outside ``exponent_bits``' range."""
    x = np.asarray(x, dtype=np.float64)
    bits = x.view(np.uint64).copy()
    one = np.uint64(1)
    if mantissa_bits < 52:
        shift = np.uint64(52 - mantissa_bits)
        last_kept = (bits >> shift) & one
        bias = ((one << (shift - one)) - one) + last_kept
        mask = ~((one << shift) - one)
        bits = (bits + bias) & mask
    if exponent_bits < 11:
        sign = bits & (one << np.uint64(63))
        exp = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64) - 1023
        max_exp = (1 << (exponent_bits - 1)) - 1
        min_exp = 1 - max_exp
        inf_bits = sign | np.uint64(0x7FF0000000000000)
        bits = np.where(exp > max_exp, inf_bits, np.where(exp < min_exp, sign, bits))
    out = bits.view(np.float64).reshape(x.shape)
    return np.where(np.isnan(x), x, out)


@register("nextafter")
def _nextafter(ctx: Ctx, x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    """The next value after ``x`` toward ``y`` *in the jaxpr's dtype* (not float64)."""
    dt = ctx.in_dtype
    ut = _unsigned(dt)
    xs, ys = np.broadcast_arrays(x.astype(dt), y.astype(dt))
    xb = xs.view(ut).astype(np.uint64)
    sign_bit = np.uint64(1) << np.uint64(dt.itemsize * 8 - 1)
    xf, yf = xs.astype(np.float64), ys.astype(np.float64)
    step = np.where((yf > xf) == (xf > 0), 1, -1)  # away from zero, or toward it
    moved = (xb.astype(np.int64) + step).astype(np.uint64)
    smallest = np.where(yf < 0, sign_bit | np.uint64(1), np.uint64(1))
    out = np.where(xf == 0, smallest, moved)
    out = out.astype(ut).view(dt).astype(np.float64)
    out = np.where(xf == yf, yf, out)
    return np.where(np.isnan(xf) | np.isnan(yf), np.nan, out)
