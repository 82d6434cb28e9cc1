"""jax.scipy.special.poch(z, m) is NaN for float32 z >= ~35: it computes gamma(z + m) / gamma(z),
and gamma overflows float32 there (inf / inf).

poch(40, 0.4) = Gamma(40.4) / Gamma(40) = 4.36 (scipy.special.poch, float64); JAX gives NaN.
scipy evaluates the ratio without forming either gamma. Found by the api catalog's edge-value
variants of jax.scipy.special (the value 100 among z's edge values). Exits 1 while the bug is there.
"""
import sys

import jax
import jax.scipy.special as jsp
import numpy as np

jax.config.update("jax_platforms", "cpu")
z = np.array([30.0, 40.0, 100.0], np.float32)
m = np.full(3, 0.4, np.float32)
got = np.asarray(jax.jit(jsp.poch)(z, m), np.float64)
# Gamma(z + m) / Gamma(z) from log-gamma in float64 (what scipy.special.poch gives)
from math import lgamma, exp
ref = np.array([exp(lgamma(float(a) + float(b)) - lgamma(float(a))) for a, b in zip(z, m)])
print("jax", jax.__version__, "z", z, "m", m)
print("jax.scipy.special.poch", got)
print("float64               ", ref)
ok = bool(np.all(np.abs(got - ref) <= 1e-4 * ref))
print("ok" if ok else "BUG: poch is not within 1e-4 of its float64 value (NaN: gamma(z) overflowed)")
sys.exit(0 if ok else 1)
