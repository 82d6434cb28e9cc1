"""Conversions: convert_element_type over every dtype pair, bitcast_convert_type between
same-width and different-width types, and reduce_precision to bf16/f16 formats.

Inputs are chosen inside the target's range (float→int truncates toward zero and
out-of-range values are implementation-defined), so NumPy's ``astype`` is the reference.
"""
import numpy as np
from jax import lax

from farm.catalog import ALL, INTEGER, UNSIGNED, CustomArg, DtypeArg, Limitation, RandArg, define, np_dtype, special

FAMILY = "conversion"
SHAPE = (3, 4)


def _domain(src: str, dst: str) -> str:
    """Keep values representable after conversion (and non-negative for unsigned targets)."""
    if dst in UNSIGNED or (dst == "bool" and src in INTEGER):
        return "positive"
    return "normal"


def _convert_ref(dst: str):
    dt = np_dtype(dst)

    def ref(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind == "c" and dt.kind != "c":
            x = x.real  # lax keeps the real part
        if dt.kind in "iu" and x.dtype.kind == "f":
            x = np.trunc(x)
        return x.astype(dt)
    return ref


for src in ALL:
    for dst in ALL:
        if src == dst:
            continue
        define(FAMILY, "convert_element_type", lambda x, to: lax.convert_element_type(x, np_dtype(to)),
               [RandArg(SHAPE, src, _domain(src, dst)), DtypeArg(dst)], dtype=src, params={"to": dst},
               reference=lambda x, to, ref=_convert_ref(dst): ref(x), compare="exact" if dst in INTEGER + ("bool",) else "allclose",
               tol=(2e-2, 1e-2) if "bfloat16" in (src, dst) else (4e-3, 1e-3) if "float16" in (src, dst) else None)

# ----------------------------------------------------------------- bitcast
SAME_WIDTH = (
    ("float32", "int32"), ("float32", "uint32"), ("int32", "float32"), ("uint32", "int32"),
    ("float16", "int16"), ("bfloat16", "uint16"), ("int16", "float16"), ("uint16", "bfloat16"),
    ("int8", "uint8"), ("uint8", "int8"),
    ("float64", "int64"), ("int64", "float64"), ("uint64", "float64"), ("complex64", "complex64"),
)
WIDER = (("float32", "uint8"), ("float32", "int16"), ("float64", "uint32"), ("int32", "int8"))  # [..] → [.., k]
NARROWER = (("uint8", "float32"), ("int16", "float32"), ("uint32", "float64"), ("int8", "int32"))  # [.., k] → [..]


def _float_bits(src: str, dst: str, shape: tuple[int, ...]):
    """Integers holding the bit patterns of ordinary ``dst`` floats (no NaN payloads or
    denormals, whose bits a backend may legally change)."""
    s, d = np_dtype(src), np_dtype(dst)
    fshape = shape[:-1] if d.itemsize > s.itemsize else shape

    def make(rng: np.random.Generator) -> np.ndarray:
        f = (rng.standard_normal(size=fshape) * 3).astype(d)
        return np.ascontiguousarray(f).view(s).reshape(shape)
    return make


def _bitcast_ref(src: str, dst: str):
    """The reference gets float inputs upcast to float64: narrow them back (exact) first."""
    dt = np_dtype(dst)

    def ref(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x).astype(np_dtype(src))
        if x.dtype.itemsize == dt.itemsize:
            return x.view(dt)
        if x.dtype.itemsize > dt.itemsize:  # adds a minor dimension
            return np.ascontiguousarray(x).view(dt).reshape(x.shape + (x.dtype.itemsize // dt.itemsize,))
        return np.ascontiguousarray(x).view(dt).reshape(x.shape[:-1])
    return ref


def _src_arg(src: str, dst: str, shape: tuple[int, ...]):
    if src in INTEGER and np_dtype(dst).kind == "f":
        return CustomArg("float_bit_patterns", _float_bits(src, dst, shape), shape, src)
    return RandArg(shape, src, "bits" if src in INTEGER else "normal")


BITCASTS = [(s, d, SHAPE) for s, d in SAME_WIDTH if s != d] + [(s, d, SHAPE) for s, d in WIDER]
BITCASTS += [(s, d, SHAPE + (np_dtype(d).itemsize // np_dtype(s).itemsize,)) for s, d in NARROWER]
#: Found by `farm sweep --shapes symbolic` (docs/findings.md): a bitcast between widths exports
#: with a symbolic dimension, but shape refinement leaves its result dynamic ("'stablehlo.
#: bitcast_convert' op has dynamic shapes"), so the artifact cannot be called at any shape.
SYMBOLIC_BITCAST = Limitation("a width-changing bitcast_convert_type with a symbolic dimension cannot be called: shape "
                              "refinement leaves stablehlo.bitcast_convert dynamic", stage="symbolic_call",
                              error="Error refining shapes")
for src, dst, shape in BITCASTS:
    define(FAMILY, "bitcast_convert_type", lambda x, to: lax.bitcast_convert_type(x, np_dtype(to)),
           [_src_arg(src, dst, shape), DtypeArg(dst)], dtype=src, params={"to": dst},
           reference=lambda x, to, ref=_bitcast_ref(src, dst): ref(x), compare="exact",
           limitations=[SYMBOLIC_BITCAST] if np_dtype(src).itemsize != np_dtype(dst).itemsize else [])

# ---------------------------------------------------------- reduce_precision
FORMATS = {"bf16": (8, 7), "f16": (5, 10), "e4m3": (4, 3)}


def _reduce_precision_ref(exponent_bits: int, mantissa_bits: int):
    def ref(x: np.ndarray) -> np.ndarray:
        import ml_dtypes

        target = {(8, 7): ml_dtypes.bfloat16, (5, 10): np.float16, (4, 3): ml_dtypes.float8_e4m3}[
            (exponent_bits, mantissa_bits)]
        return x.astype(target).astype(np.float64)
    return ref


for dt in ("float32", "float64"):
    for fmt, (e, m) in FORMATS.items():
        kind = "unit" if fmt == "e4m3" else "normal"
        define(FAMILY, "reduce_precision",
               lambda x, e=e, m=m: lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m),
               [RandArg(SHAPE, dt, kind)], dtype=dt, params={"format": fmt},
               reference=_reduce_precision_ref(e, m), compare="exact")


# ----------------------------------------------------------------- special values
# NaN, ±Inf, subnormals and out-of-range values converted to every integer width (XLA
# truncates toward zero, saturates, and makes NaN 0), to narrower floats (overflow to
# Inf, rounding to subnormals) and to bool; integer extremes narrowed (wrap-around).
for src in ("bfloat16", "float16", "float32", "float64"):
    for dst in ("int8", "int32", "int64", "uint8", "uint32", "uint64", "bool", "float16", "bfloat16", "float32"):
        if src != dst:
            define(FAMILY, "convert_element_type", lambda x, to: lax.convert_element_type(x, np_dtype(to)),
                   [special.arg(src), DtypeArg(dst)], dtype=src, params={"to": dst}, group="special_values")
for src, dst in (("int32", "int8"), ("int32", "uint8"), ("int64", "int32"), ("uint32", "int32"), ("int8", "uint32"),
                 ("int64", "float32"), ("uint64", "float16")):
    define(FAMILY, "convert_element_type", lambda x, to: lax.convert_element_type(x, np_dtype(to)),
           [special.arg(src), DtypeArg(dst)], dtype=src, params={"to": dst}, group="special_values")
