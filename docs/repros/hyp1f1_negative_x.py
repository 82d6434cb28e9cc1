"""jax.scipy.special.hyp1f1(a, b, x) is wrong for negative x in float32: 619 at x = -30 where
the value is 0.2387, -2.3e14 at x = -60, NaN at x = -100.

For |x| < 100 JAX sums the Taylor series directly; for x < 0 its terms alternate and grow to
about |x|^k / k!, so float32 cancellation leaves nothing of the answer (Kummer's transformation
M(a, b, x) = e^x M(b - a, b, -x) has no cancellation). A NaN a or b is also answered 1: the
series loop's test |term| / |sum| > eps is False for NaN, so it stops before adding anything.
Found by the api catalog's edge-value variants of jax.scipy.special. Exits 1 while either is there.
"""
import sys

import jax
import jax.scipy.special as jsp
import numpy as np

jax.config.update("jax_platforms", "cpu")
f = np.float32


def kummer64(a: float, b: float, x: float, terms: int = 400) -> float:
    """M(a, b, x) for x < 0 as e^x M(b - a, b, -x): a series of positive terms, in float64."""
    s = t = 1.0
    for k in range(terms):
        t *= (b - a + k) / (b + k) * (-x) / (k + 1)
        s += t
    return float(np.exp(x) * s)


ok = True
for x in (-5.0, -30.0, -60.0, -100.0):
    got = float(jax.jit(jsp.hyp1f1)(f(0.4), f(1.5), f(x)))
    ref = kummer64(0.4, 1.5, x)
    good = abs(got - ref) <= 1e-3 * abs(ref)
    ok &= good
    print(f"hyp1f1(0.4, 1.5, {x}) = {got:.6g}   float64 {ref:.6g}   {'ok' if good else 'WRONG'}")
nan_a = float(jax.jit(jsp.hyp1f1)(f(np.nan), f(1.5), f(0.4)))
nan_b = float(jax.jit(jsp.hyp1f1)(f(0.4), f(np.nan), f(0.4)))
print(f"hyp1f1(nan, 1.5, 0.4) = {nan_a}, hyp1f1(0.4, nan, 0.4) = {nan_b} (NaN expected)")
ok &= bool(np.isnan(nan_a) and np.isnan(nan_b))
print("jax", jax.__version__, "ok" if ok else "BUG")
sys.exit(0 if ok else 1)
