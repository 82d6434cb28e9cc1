"""Arbitrary-precision values (mpmath) where a float64 twin is not enough at edge values.

An api function's edge variants are judged against its NumPy/SciPy twin in float64
(``farm.judge.edges.twin_at_edges``). At the extremes SciPy is sometimes the one that is wrong
(the log of an underflowed pdf, a cancelling formula, an infinity where the limit is finite).
Where JAX and the twin disagree beyond the harness's tolerance, the element's value is computed
again with mpmath at 40 significant digits, rounded to the output's dtype; where that differs
from the twin beyond the tolerance, it replaces the twin's (and is counted). An element where
JAX and the twin agree is not recomputed: the arbiter decides disagreements, it does not
re-derive every answer. Functions mpmath has no routine for, or whose series would not end at a
huge argument, are left to the twin (``EXACT`` names what is covered).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath as mp
import numpy as np

#: Arguments past this magnitude are not handed to mpmath's series (hypergeometric, incomplete
#: gamma and beta, Hurwitz zeta, polygamma): they converge slowly or not at all there.
_SERIES_LIMIT = 1e6
#: At most this many disagreeing elements a comparison are recomputed.
LIMIT = 4096


def _logabs(f: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *a: mp.log(abs(f(*a)))


def _xlogy(x: Any, y: Any) -> Any:
    return mp.mpf(0) if x == 0 and not mp.isnan(y) else x * mp.log(y)


def _xlog1py(x: Any, y: Any) -> Any:
    return mp.mpf(0) if x == 0 and not mp.isnan(y) else x * mp.log1p(y)


def _boxcox(x: Any, lmbda: Any) -> Any:
    return mp.log(x) if lmbda == 0 else mp.expm1(lmbda * mp.log(x)) / lmbda


def _boxcox1p(x: Any, lmbda: Any) -> Any:
    return mp.log1p(x) if lmbda == 0 else mp.expm1(lmbda * mp.log1p(x)) / lmbda


#: The gamma family: at a pole (an argument, or the arguments' sum, a non-positive integer) mpmath's
#: answer is one side's limit or a cancelled value, no more right than SciPy's: not arbitrated.
POLES = frozenset({"scipy.special.gamma", "scipy.special.gammaln", "scipy.special.digamma", "scipy.special.polygamma",
                   "scipy.special.beta", "scipy.special.betaln", "scipy.special.poch"})


def _at_pole(args: list[float]) -> bool:
    return any(np.isfinite(x) and x <= 0 and x == np.floor(x) for x in (*args, sum(args)))


#: "label.name" -> (the function on mpmath numbers, whether its arguments go to a series)
EXACT: dict[str, tuple[Callable[..., Any], bool]] = {
    "scipy.special.erf": (mp.erf, False),
    "scipy.special.erfc": (mp.erfc, False),
    "scipy.special.erfcx": (lambda x: mp.exp(x * x) * mp.erfc(x), False),
    "scipy.special.erfinv": (mp.erfinv, False),
    "scipy.special.erfcinv": (lambda x: mp.erfinv(1 - x), False),
    "scipy.special.dawsn": (lambda x: mp.sqrt(mp.pi) / 2 * mp.exp(-x * x) * mp.erfi(x), False),
    "scipy.special.ndtr": (mp.ncdf, False),
    "scipy.special.log_ndtr": (lambda x: mp.log(mp.ncdf(x)), False),
    "scipy.special.expit": (lambda x: 1 / (1 + mp.exp(-x)), False),
    "scipy.special.logit": (lambda x: mp.log(x / (1 - x)), False),
    "scipy.special.gamma": (mp.gamma, False),
    "scipy.special.gammaln": (_logabs(mp.gamma), False),
    "scipy.special.digamma": (mp.digamma, False),
    "scipy.special.polygamma": (mp.psi, True),
    "scipy.special.beta": (mp.beta, False),
    "scipy.special.betaln": (_logabs(mp.beta), False),
    "scipy.special.poch": (mp.rf, False),
    "scipy.special.gammainc": (lambda a, x: mp.gammainc(a, 0, x, regularized=True), True),
    "scipy.special.gammaincc": (lambda a, x: mp.gammainc(a, x, mp.inf, regularized=True), True),
    "scipy.special.betainc": (lambda a, b, x: mp.betainc(a, b, 0, x, regularized=True), True),
    "scipy.special.hyp1f1": (mp.hyp1f1, True),
    "scipy.special.hyp2f1": (mp.hyp2f1, True),
    "scipy.special.zeta": (mp.zeta, True),
    "scipy.special.i0": (lambda x: mp.besseli(0, x), False),
    "scipy.special.i1": (lambda x: mp.besseli(1, x), False),
    "scipy.special.i0e": (lambda x: mp.exp(-abs(x)) * mp.besseli(0, x), False),
    "scipy.special.i1e": (lambda x: mp.exp(-abs(x)) * mp.besseli(1, x), False),
    "scipy.special.exp1": (mp.e1, False),
    "scipy.special.expi": (mp.ei, False),
    "scipy.special.expn": (lambda n, x: mp.expint(n, x), True),
    "scipy.special.spence": (lambda x: mp.polylog(2, 1 - x), True),
    "scipy.special.xlogy": (_xlogy, False),
    "scipy.special.xlog1py": (_xlog1py, False),
    "scipy.special.entr": (lambda x: -x * mp.log(x) if x > 0 else (mp.mpf(0) if x == 0 else mp.ninf), False),
    "scipy.special.boxcox": (_boxcox, False),
    "scipy.special.boxcox1p": (_boxcox1p, False),
    "scipy.stats.laplace.logpdf": (lambda x: -mp.log(2) - abs(x), False),
    "scipy.stats.laplace.pdf": (lambda x: mp.exp(-abs(x)) / 2, False),
    "scipy.stats.norm.logpdf": (lambda x: -x * x / 2 - mp.log(2 * mp.pi) / 2, False),
    "scipy.stats.norm.logcdf": (lambda x: mp.log(mp.ncdf(x)), False),
    "scipy.stats.norm.logsf": (lambda x: mp.log(mp.ncdf(-x)), False),
    "scipy.stats.logistic.logpdf": (lambda x: -abs(x) - 2 * mp.log1p(mp.exp(-abs(x))), False),
    "scipy.stats.expon.logsf": (lambda x: -x if x >= 0 else mp.mpf(0), False),
}


def value(key: str, args: list[float]) -> float | None:
    """``key``'s value at ``args`` (float64 numbers), to 40 digits, as a float64; None where
    mpmath gives no real answer (a pole, an error, NaN, a complex value) or is not asked (a
    series at a huge argument, the gamma family at a pole: ``POLES``)."""
    f, series = EXACT[key]
    if any(np.isnan(a) for a in args) or series and any(abs(a) > _SERIES_LIMIT for a in args) \
            or key in POLES and _at_pole(args):
        return None
    try:
        with mp.workdps(40):
            v = f(*(mp.mpf(a) for a in args))
            if isinstance(v, mp.mpc):
                if v.imag != 0:
                    return None
                v = v.real
            v = float(v)
            return None if np.isnan(v) else v  # NaN is mpmath's "undefined", not a value to hold JAX to
    except (ValueError, ZeroDivisionError, ArithmeticError, TypeError, mp.libmp.NoConvergence):
        return None


def corrected(key: str, operands: list[np.ndarray], actual: np.ndarray, ref: np.ndarray, rtol: float,
              atol: float, flushed: list[np.ndarray] | None = None) -> tuple[np.ndarray, int]:
    """The twin's answers ``ref`` with mpmath's in place where JAX's ``actual`` and the twin
    disagree beyond the tolerance and mpmath disagrees with the twin too (on the operands as
    given or, where a device flushes subnormals, as ``flushed``: whichever is nearer JAX's).
    (The answers, and how many it replaced.)"""
    if key not in EXACT or actual.dtype.kind != "f" or np.shape(ref) != actual.shape:
        return ref, 0
    with np.errstate(all="ignore"):
        r64, a64 = np.asarray(ref, np.float64), actual.astype(np.float64)
        tol = np.where(np.isfinite(r64), rtol * np.abs(r64) + atol, 0.0)
        differ = ~((a64 == r64) | (np.isnan(a64) & np.isnan(r64))) & ~(np.abs(a64 - r64) <= tol)
    idx = np.flatnonzero(differ)[:LIMIT]
    if not idx.size:
        return ref, 0
    ops = [np.broadcast_to(np.asarray(o, np.float64), actual.shape).ravel() for o in operands]
    flat = [np.broadcast_to(np.asarray(o, np.float64), actual.shape).ravel() for o in flushed] if flushed else None
    out, n = np.array(ref, copy=True).reshape(-1), 0
    for i in idx:
        cands = [value(key, [float(o[i]) for o in ops])]
        if flat is not None and any(float(f[i]) != float(o[i]) for f, o in zip(flat, ops)):
            cands.append(value(key, [float(f[i]) for f in flat]))
        cands = [c for c in cands if c is not None]
        if not cands:
            continue
        with np.errstate(all="ignore"):
            rounded = [float(np.asarray(c).astype(actual.dtype)) for c in cands]
            e = min(rounded, key=lambda c: _gap(c, float(a64.flat[i])))
            twin = float(r64.flat[i])
            # both infinite (a pole's side, an overflow): the twin stands
            if not (np.isinf(e) and np.isinf(twin)) and _gap(e, twin) > (rtol * abs(e) + atol if np.isfinite(e) else 0.0):
                out[i] = e
                n += 1
    return out.reshape(actual.shape).astype(np.asarray(ref).dtype, copy=False), n


def _gap(x: float, y: float) -> float:
    if x == y or (np.isnan(x) and np.isnan(y)):
        return 0.0
    d = abs(x - y)
    return float("inf") if np.isnan(d) else d
