"""Exact values of each function, from a multiprecision library, cached on disk.

MPFR (through gmpy2) rounds every function it has correctly to the working precision,
whatever the argument (sin(1e308) included); the working precision is 80 bits for
results of 32 bits or fewer and 160 bits for float64. Where MPFR has no function the
value is composed at that precision: ``logistic`` = 1/(1+exp(-x)) (two more roundings
at 80/160 bits), ``erf_inv`` by Newton steps on MPFR's erf from SciPy's float64 start,
``bessel_i0e``/``bessel_i1e`` by mpmath's ``besseli`` times exp(-|x|).

The value is returned as ``(hi, off)``: ``hi`` the exact value rounded to float64 (a
float32 or 16-bit result's error is then known to 2^-29 ULP or better) and, for float64
results, ``off``: how far the exact value lies from ``hi``, in units of the float64 ULP
at ``hi`` (0 for narrower results). The ULP error of a result ``y`` is then
``|(y - hi)/ulp - off|``, a real number: no reference is rounded to the target, so
there is no double rounding.

Values depend only on (function, dtype, inputs), never on jax: they are cached under
``$FARM_CACHE_DIR/accuracy/reference`` keyed by the function, dtype, precision, the
inputs' bytes, this module's source and the libraries' versions, so a changed input,
rule or library cannot be served a stale value.
"""
from __future__ import annotations

import hashlib
import math
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import gmpy2
import mpmath
import numpy as np
import scipy
import scipy.special as sp

from farm.accuracy.functions import FUNCTIONS
from farm.accuracy.inputs import np_dtype

#: working precision in bits, by result width
PRECISION = {"bfloat16": 80, "float16": 80, "float32": 80, "float64": 160}
#: cache format version: bump when the layout of a cached file changes
FORMAT = 1


def _mp(name: str):  # noqa: ANN202
    """The multiprecision rule of ``name``: a function of gmpy2 mpfr arguments."""
    g = gmpy2
    rules = {
        "exp": g.exp, "exp2": g.exp2, "expm1": g.expm1, "log": g.log, "log1p": g.log1p, "sqrt": g.sqrt,
        "rsqrt": g.rec_sqrt, "cbrt": g.cbrt, "sin": g.sin, "cos": g.cos, "tan": g.tan, "asin": g.asin,
        "acos": g.acos, "atan": g.atan, "sinh": g.sinh, "cosh": g.cosh, "tanh": g.tanh, "asinh": g.asinh,
        "acosh": g.acosh, "atanh": g.atanh, "erf": g.erf, "erfc": g.erfc, "digamma": g.digamma,
        "square": g.square, "atan2": g.atan2, "rem": g.fmod,
        "pow": lambda x, y: x ** y,
        "logistic": lambda x: 1 / (1 + g.exp(-x)),
        "lgamma": lambda x: g.lgamma(x)[0],
        "erf_inv": _erf_inv,
        "bessel_i0e": lambda x: _besselie(0, x), "bessel_i1e": lambda x: _besselie(1, x),
    }
    return rules[name]


def _erf_inv(x):  # noqa: ANN001, ANN202
    if gmpy2.is_nan(x) or abs(x) >= 1:
        return gmpy2.copy_sign(gmpy2.inf(), x) if abs(x) == 1 else gmpy2.nan()
    if x == 0:
        return x
    y = gmpy2.mpfr(float(sp.erfinv(float(x))))
    if not gmpy2.is_finite(y) or y == 0:
        y = gmpy2.mpfr(math.copysign(1e-300, float(x)))
    c = 2 / gmpy2.sqrt(gmpy2.const_pi())
    for _ in range(4):  # quadratic convergence from ~50 good bits: 4 steps exceed 160 bits
        y -= (gmpy2.erf(y) - x) / (c * gmpy2.exp(-y * y))
    return y


def _besselie(order: int, x):  # noqa: ANN001, ANN202
    if gmpy2.is_nan(x):
        return x
    if gmpy2.is_infinite(x):
        return gmpy2.mpfr(0) if order == 0 or x > 0 else gmpy2.mpfr("-0")
    if x == 0:
        return gmpy2.mpfr(1) if order == 0 else x
    v = mpmath.besseli(order, mpmath.mpf(str(x))) * mpmath.exp(-abs(mpmath.mpf(str(x))))
    return gmpy2.mpfr(str(v))


def _exact(name: str, args: list[np.ndarray]) -> np.ndarray:
    """Rules whose result is a float of the input's dtype, computed exactly by NumPy."""
    x = args[0]
    with np.errstate(all="ignore"):
        out = {"floor": np.floor, "ceil": np.ceil, "round": np.rint, "sign": np.sign, "abs": np.abs,
               "neg": np.negative}.get(name)
        if out is not None:
            return out(x.astype(np.float64))
        if name == "nextafter":
            return np.nextafter(x, args[1]).astype(np.float64)
    raise KeyError(name)


def _chunk(job: tuple[str, str, list[list[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """(hi, off) of one chunk, in a worker process."""
    name, dtype, cols = job
    prec = PRECISION[dtype]
    gmpy2.set_context(gmpy2.context(precision=prec, emin=-(1 << 20), emax=1 << 20, subnormalize=False))
    mpmath.mp.prec = prec
    rule = _mp(name)
    mpfr = gmpy2.mpfr
    if len(cols) == 1:
        vals = [rule(mpfr(a)) for a in cols[0]]
    else:
        vals = [rule(mpfr(a), mpfr(b)) for a, b in zip(*cols)]
    hi = np.array([float(v) for v in vals], dtype=np.float64)
    off = np.zeros_like(hi)
    if dtype == "float64":
        for i, (v, h) in enumerate(zip(vals, hi.tolist())):
            if math.isfinite(h) and gmpy2.is_finite(v):
                q = max(math.frexp(h)[1] - 1, -1022) - 52 if h else -1074
                off[i] = float(gmpy2.mul_2exp(v - h, -q))
    return hi, off


def source_digest() -> str:
    """What the cache key knows of the rules: this module's source and the libraries."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(f"{FORMAT} gmpy2 {gmpy2.version()} {gmpy2.mpfr_version()} mpmath {mpmath.__version__} "
             f"scipy {scipy.__version__} numpy {np.__version__}".encode())
    return h.hexdigest()


def cache_key(name: str, dtype: str, args: list[np.ndarray]) -> str:
    h = hashlib.sha256(f"{name}|{dtype}|{PRECISION[dtype]}|{source_digest()}".encode())
    for a in args:
        h.update(np.ascontiguousarray(a).view(np.uint8).tobytes())
    return h.hexdigest()


def cache_dir() -> Path:
    root = os.environ.get("FARM_CACHE_DIR") or Path.home() / ".cache" / "lowering-farm"
    return Path(root) / "accuracy" / "reference"


def exact(name: str, dtype: str, args: list[np.ndarray], workers: int | None = None,
          cache: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(hi, off) of ``name`` at ``args`` (arrays of ``dtype``): see the module docstring."""
    path = cache_dir() / f"{cache_key(name, dtype, args)}.npz"
    if cache and path.exists():
        with np.load(path) as z:
            return z["hi"], z["off"]
    if FUNCTIONS[name].engine == "exact":
        hi = _exact(name, [np.asarray(a) for a in args]).astype(np.float64)
        off = np.zeros_like(hi)
    else:
        hi, off = _compute(name, dtype, args, workers or os.cpu_count() or 1)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, hi=hi, off=off)
        os.replace(tmp, path)
    return hi, off


def _compute(name: str, dtype: str, args: list[np.ndarray], workers: int) -> tuple[np.ndarray, np.ndarray]:
    cols = [np.asarray(a).astype(np.float64) for a in args]
    n = cols[0].size
    if n == 0:
        return np.zeros(0), np.zeros(0)
    pieces = max(1, min(workers * 8, n // 2048 or 1))
    bounds = np.linspace(0, n, pieces + 1).astype(int)
    jobs = [(name, dtype, [c[a:b].tolist() for c in cols]) for a, b in zip(bounds[:-1], bounds[1:])]
    if workers <= 1 or pieces == 1:
        parts = [_chunk(j) for j in jobs]
    else:
        with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
            parts = list(pool.map(_chunk, jobs))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def rounded(hi: np.ndarray, dtype: str) -> np.ndarray:
    """The reference in ``dtype`` (for the special classes: NaN, ±Inf, ±0, overflow)."""
    with np.errstate(all="ignore"):
        return hi.astype(np_dtype(dtype))
