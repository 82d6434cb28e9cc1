"""float32 jax.scipy.special.comb(N, k) loses N's digits: it is exp(lgamma(N + 1) - lgamma(k + 1)
- lgamma(N - k + 1)), and the difference of two large lgamma values cancels in float32.
comb(1e3, 1) = 1000 (JAX 1000.45), comb(1e5, 3) = 1.667e14 (JAX 1.894e14, 14% off),
comb(1e6, 1) = 1e6 (JAX 442413), comb(1e10, 1) = 1e10 (JAX 1). The float64 version is right
at these N. Found by the api catalog's edge-value variants judged against scipy.special.comb
(docs/api.md). No upstream report found. Needs only jax and numpy. Exits 1 while any is more
than 1e-4 off, 0 once fixed.
"""
import sys
from math import comb

import jax
import jax.scipy.special as jsp
import numpy as np

jax.config.update("jax_platforms", "cpu")
bad = 0
print("jax", jax.__version__)
for n, k in ((1000, 1), (100_000, 3), (1_000_000, 1), (10_000_000_000, 1)):
    got = float(jax.jit(jsp.comb)(np.float32(n), np.float32(k)))
    want = float(comb(n, k))
    ok = abs(got - want) <= 1e-4 * want
    bad += not ok
    print(f"comb({n:g}, {k}) = {got:.7g}, expected {want:.7g}{'' if ok else '  <-- wrong'}")
print("fixed" if not bad else "still fails")
sys.exit(1 if bad else 0)
