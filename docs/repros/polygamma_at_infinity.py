"""lax.polygamma(m, +inf) is NaN for m >= 1; the derivatives of digamma vanish at infinity (0).

Also ψ⁽¹⁾(1e30) is 0 in float32 where 1e-30 is a normal float32. Found by `farm sweep --edges`
(polygamma_float32_3x4_3x4, the x operand at +inf). Known upstream: jax-ml/jax#38608.
Needs only jax and numpy. Exits 1 while the bug is there, 0 once fixed.
"""
import sys

import jax.scipy.special as jsp
import numpy as np
from jax import lax

x = np.float32(np.inf)
got = [float(lax.polygamma(np.float32(m), x)) for m in (1, 2, 3)]
print("lax.polygamma(m, inf), m = 1, 2, 3:", got, "expected [0.0, 0.0, 0.0]")
print("jax.scipy.special.polygamma(1, inf):", float(jsp.polygamma(1, x)))
ok = all(g == 0.0 for g in got)
print("fixed" if ok else "still fails")
sys.exit(0 if ok else 1)
