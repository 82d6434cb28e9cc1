"""jax.scipy.special.expi(inf) is NaN (the limit, and scipy's value, is inf) and
jax.scipy.special.spence(3.4e38) is NaN (scipy: -3937.5; spence(1e20) is right, -1062.0).

Found by the api catalog's edge-value variants of jax.scipy.special. Exits 1 while either is there.
"""
import sys

import jax
import jax.scipy.special as jsp
import numpy as np

jax.config.update("jax_platforms", "cpu")
big = np.finfo(np.float32).max
e = float(jax.jit(jsp.expi)(np.float32(np.inf)))
s = float(jax.jit(jsp.spence)(np.float32(big)))
s20 = float(jax.jit(jsp.spence)(np.float32(1e20)))
# spence(x) for large x: -(log x)^2 / 2 - pi^2 / 6 + O(log x / x)  (DLMF 25.12.4 with x -> 1 - x)
ref = -np.log(float(big)) ** 2 / 2 - np.pi ** 2 / 6
print("jax", jax.__version__, f"expi(inf) = {e} (inf expected); spence({big:.3g}) = {s} (about {ref:.6g});",
      f"spence(1e20) = {s20:.6g}")
ok = e == np.inf and abs(s - ref) <= 1e-3 * abs(ref)
print("ok" if ok else "BUG")
sys.exit(0 if ok else 1)
