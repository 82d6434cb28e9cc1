"""ULP errors of a device's results against the exact values, and what a table row holds.

The ULP error of a result ``y`` against the exact value ``v`` is ``|y - v| / ulp(v)``, a
real number, where ``ulp(v)`` is the spacing of the result's dtype at ``v`` (its
subnormal spacing below the smallest normal). A correctly rounded result errs by at most
0.5. It is measured where both the reference rounded to the dtype and the result are
finite; the rest is **special-value agreement**, reported apart: NaN where the exact
value is NaN (and nowhere else), the same infinity, the reference's sign on a zero.

**Subnormals may be flushed** (XLA's CPU backend does): an input below the smallest
normal may be read as a zero of its sign, and a result below it may come out as a zero.
Such an element's error is the smaller of the IEEE one and the flushed one; how many
elements needed the flushed reading is counted with the special values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import ml_dtypes
import numpy as np

from farm.accuracy.inputs import np_dtype

#: the distribution's bins: (label, upper bound in ULP); the last bin is everything above 4
BINS = (("0", 0.0), ("<=0.5", 0.5), ("<=1", 1.0), ("<=2", 2.0), ("<=4", 4.0), (">4", float("inf")))
#: how many worst inputs a row keeps
WORST = 5
#: below this the float64 arithmetic of the ULP error itself is noise (2^-29 ULP for <= 32-bit results)
SLACK = 1e-6


@dataclass(frozen=True)
class Score:
    """One row of the table: one primitive, dtype and platform."""

    primitive: str
    dtype: str
    platform: str
    n: int
    max_ulp: float
    distribution: dict[str, int]
    worst: list[dict[str, Any]]
    special: dict[str, Any]
    error: str | None = None
    seconds: float = 0.0
    #: the max over the elements with no subnormal input and an exact result of 0 or at least
    #: 2^p times the smallest normal: what a tolerance for normal data can rely on
    #: (``max_ulp`` includes the rest)
    max_ulp_normal: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"primitive": self.primitive, "dtype": self.dtype, "platform": self.platform, "n": self.n,
                "max_ulp": self.max_ulp, "distribution": dict(self.distribution), "worst": list(self.worst),
                "special": dict(self.special), "error": self.error, "seconds": self.seconds,
                "max_ulp_normal": self.max_ulp_normal}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Score":
        return cls(d["primitive"], d["dtype"], d["platform"], int(d["n"]), float(d["max_ulp"]),
                   dict(d["distribution"]), list(d["worst"]), dict(d["special"]), d.get("error"),
                   float(d.get("seconds", 0.0)), float(d.get("max_ulp_normal", d["max_ulp"])))


def ulp(hi: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of ``dtype`` at each value (its subnormal spacing below the smallest normal)."""
    fi = ml_dtypes.finfo(np_dtype(dtype))
    p = int(fi.nmant)
    emin = int(np.log2(float(fi.tiny)))
    with np.errstate(all="ignore"):
        e = np.frexp(np.abs(hi))[1].astype(np.int64) - 1
    e = np.maximum(np.where(hi == 0, emin, e), emin)
    return np.ldexp(1.0, (e - p).astype(np.int32))


def ulp_errors(got: np.ndarray, hi: np.ndarray, off: np.ndarray, dtype: str) -> np.ndarray:
    """The ULP error of each finite result against the exact value ``(hi, off)``."""
    g = np.asarray(got).astype(np.float64)
    with np.errstate(all="ignore"):
        return np.abs((g - hi) / ulp(hi, dtype) - off)


def score(primitive: str, dtype: str, platform: str, args: list[np.ndarray], got: np.ndarray,
          exact: tuple[np.ndarray, np.ndarray],
          flushed_exact: Callable[[list[np.ndarray]], tuple[np.ndarray, np.ndarray]]) -> Score:
    """The row for ``got`` (the device's results on ``args``). ``flushed_exact(args)``: the
    exact values at other inputs (the flushed ones), from the same reference."""
    dt = np_dtype(dtype)
    hi, off = exact
    g = np.asarray(got).astype(np.float64)
    with np.errstate(all="ignore"):
        ref = hi.astype(dt).astype(np.float64)
    tiny = float(ml_dtypes.finfo(dt).tiny)
    both = np.isfinite(ref) & np.isfinite(g)
    err = np.where(both, ulp_errors(g, hi, off, dtype), np.nan)
    # subnormal inputs read as zeros of their sign
    with np.errstate(invalid="ignore"):  # NaN inputs of 16-bit types
        wide = [np.asarray(a).astype(np.float64) for a in args]
    sub_in = np.zeros(g.shape, dtype=bool)
    for a in wide:
        sub_in |= (a != 0) & (np.abs(a) < tiny)
    flushed_in = 0
    if sub_in.any():
        fl = [np.where((a != 0) & (np.abs(a) < tiny), np.copysign(0.0, a), a)[sub_in].astype(dt) for a in wide]
        fhi, foff = flushed_exact(fl)
        with np.errstate(all="ignore"):
            fref = fhi.astype(dt).astype(np.float64)
        ferr = np.where(np.isfinite(fref) & np.isfinite(g[sub_in]), ulp_errors(g[sub_in], fhi, foff, dtype), np.nan)
        cur = err[sub_in]
        better = np.isnan(cur) & ~np.isnan(ferr) | (ferr < cur)
        flushed_in = int(better.sum())
        err[sub_in] = np.where(better, ferr, cur)
        ref = ref.copy()
        sub_ref = ref[sub_in]
        ref[sub_in] = np.where(better, fref, sub_ref)
        both = np.isfinite(ref) & np.isfinite(g)
    # results below the smallest normal may come out as zeros of their sign
    out_flush = both & (g == 0) & (np.abs(hi) < tiny) & (np.signbit(g) == np.signbit(hi)) & (err > 0.5)
    err = np.where(out_flush, 0.0, err)
    special = _special(ref, g, both)
    special["flushed_inputs"] = flushed_in
    special["flushed_results"] = int(out_flush.sum())
    e = err[both]
    # normal data: no subnormal input, and an exact result that is 0 or at least 2^p times the
    # smallest normal (where no intermediate of a correct algorithm need underflow)
    p = int(ml_dtypes.finfo(dt).nmant) + 1
    normal = both & ~sub_in & ((np.abs(hi) >= tiny * 2.0 ** p) | (hi == 0))
    worst = _worst(err, both, args, g, hi)
    return Score(primitive, dtype, platform, int(g.size), float(e.max()) if e.size else 0.0, _distribution(e), worst,
                 special, max_ulp_normal=float(err[normal].max()) if normal.any() else 0.0)


def _distribution(e: np.ndarray) -> dict[str, int]:
    out, lower = {}, -1.0
    for label, upper in BINS:
        top = upper + (SLACK if upper else 0.0)
        out[label] = int(((e > lower) & (e <= top)).sum()) if upper != float("inf") else int((e > lower).sum())
        lower = top
    return out


def _worst(err: np.ndarray, both: np.ndarray, args: list[np.ndarray], g: np.ndarray, hi: np.ndarray) -> list[dict]:
    idx = np.flatnonzero(both)
    if not idx.size:
        return []
    top = idx[np.argsort(-err[idx], kind="stable")[:WORST]]
    return [{"x": [_num(a.flat[i]) for a in args], "got": _num(g[i]), "exact": _num(hi[i]), "ulp": _num(err[i])}
            for i in top.tolist() if err[i] > 0]


def _num(v: Any) -> float | str:
    f = float(v)
    return f if np.isfinite(f) else repr(f)


def _special(ref: np.ndarray, g: np.ndarray, both: np.ndarray) -> dict[str, Any]:
    """Agreement on the special values, each as [agree, of]."""
    def pair(mask: np.ndarray, agree: np.ndarray) -> list[int]:
        return [int((mask & agree).sum()), int(mask.sum())]

    nan_r, nan_g = np.isnan(ref), np.isnan(g)
    inf_r = np.isinf(ref)
    zero_r = both & (ref == 0)
    finite_r = np.isfinite(ref)
    out = {"nan": pair(nan_r, nan_g), "inf": pair(inf_r, g == ref), "signed_zero": pair(zero_r & (g == 0),
                                                                                          np.signbit(g) == np.signbit(ref)),
           "finite": pair(finite_r, np.isfinite(g))}
    out["agree"] = all(a == b for a, b in (out["nan"], out["inf"], out["signed_zero"], out["finite"]))
    return out
