"""float32 lax.polygamma(m, x) of a large order overflows in its intermediates: ψ⁽⁴⁰⁾(2.84) is
-inf where the value, -2.1e29, is a normal float32, and ψ⁽¹⁰⁰⁾(2.84) is NaN where the value,
-1.5e112, is past float32's range (-inf). float64 gives both right.

Found by `farm sweep --edges` (polygamma_float32_3x4_3x4, the order at the edge value 100).
No upstream report found. Needs only jax and numpy. Exits 1 while the bug is there, 0 once fixed.
"""
import sys

import numpy as np
from jax import lax

x = np.float32(2.84)
v40 = float(lax.polygamma(np.float32(40), x))
v100 = float(lax.polygamma(np.float32(100), x))
print(f"float32 polygamma(40, 2.84) = {v40} (true -2.1164e+29, a normal float32)")
print(f"float32 polygamma(100, 2.84) = {v100} (true -1.5306e+112: -inf in float32)")
ok = np.isfinite(v40) and abs(v40 + 2.1163864e29) <= 1e-3 * 2.1163864e29 and v100 == -np.inf
print("fixed" if ok else "still fails")
sys.exit(0 if ok else 1)
