"""Cumulative primitives: cumsum, cumprod, cummax, cummin, cumlogsumexp, forward and
reverse along each axis, against NumPy's ufunc accumulations."""
import numpy as np
from jax import lax

from farm.catalog import (FLOAT, INEXACT, INTEGER, NUMERIC, SCAN_ABORTS_CPU, SCAN_VJP2_ABORTS_CPU, SCAN_VJP_ABORTS_CPU,
                          RandArg, StaticArg, define)

FAMILY = "cumulative"
SHAPE = (4, 6)
TOL = {"bfloat16": (3e-2, 5e-2), "float16": (5e-3, 1e-2), "float32": (2e-5, 1e-5), "complex64": (2e-5, 1e-5)}


def _accumulate(ufunc, dtype_kept: bool = True):
    def ref(x, axis, reverse):
        y = np.flip(x, axis) if reverse else x
        out = ufunc.accumulate(y, axis=axis, dtype=x.dtype if dtype_kept and x.dtype.kind in "iub" else None)
        return np.flip(out, axis) if reverse else out
    return ref


OPS = {
    "cumsum": (lax.cumsum, _accumulate(np.add), NUMERIC, "normal"),
    "cumprod": (lax.cumprod, _accumulate(np.multiply), NUMERIC, "unit"),
    "cummax": (lax.cummax, _accumulate(np.maximum), INTEGER + FLOAT, "normal"),
    "cummin": (lax.cummin, _accumulate(np.minimum), INTEGER + FLOAT, "normal"),
    "cumlogsumexp": (lax.cumlogsumexp, _accumulate(np.logaddexp), FLOAT, "normal"),
}

for prim, (fn, ref, dtypes, domain) in OPS.items():
    for dt in dtypes:
        dom = "small_int" if (prim == "cumprod" and dt in INTEGER) else domain
        for axis, reverse in ((0, False), (1, False), (1, True)):
            define(FAMILY, prim, lambda x, axis, reverse, fn=fn: fn(x, axis=axis, reverse=reverse),
                   [RandArg(SHAPE, dt, dom), StaticArg(axis), StaticArg(reverse)], dtype=dt,
                   params={"axis": axis, "reverse": reverse}, reference=ref,
                   tol=TOL.get(dt) if dt in INEXACT else None,
                   # a forward cumsum's cuda/rocm crossexec aborts (run apart); a reverse one's modules
                   # are the cpu's, but its derivative (--vjp) is a forward cumsum that aborts the worker,
                   # as a forward one's second derivative (--vjp 2) is (a complex cumsum's module has no
                   # chlo.scan: it compiles and runs there)
                   limitations=[] if prim != "cumsum" or dt.startswith("complex") else
                   [SCAN_VJP_ABORTS_CPU] if reverse else [SCAN_ABORTS_CPU, SCAN_VJP2_ABORTS_CPU])
