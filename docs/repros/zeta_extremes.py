"""float32 lax.zeta (Hurwitz ζ(s, q)) away from the middle of its domain: NaN for a huge s (1e4,
q = 4.9: the value is 4.9**-1e4 + ..., 0 in float32), 5% off next to the pole (ζ(1 + 1e-6, 1.33)
is 1.0486e6, true 1.0000e6), and NaN for ζ(inf, q) with q < 1 (the first term q**-s is inf).
jax-ml/jax#38271 reports ζ(inf, 0) = NaN; the others: no upstream report found.

Found by `farm sweep --edges all` (zeta harnesses, s at edge values). Needs only jax and numpy.
Exits 1 while any is wrong, 0 once fixed.
"""
import sys

import numpy as np
from jax import lax

f = np.float32
cases = [
    ("zeta(1e4, 4.9)", float(lax.zeta(f(1e4), f(4.9))), 0.0),
    ("zeta(1 + 1e-6, 1.33)", float(lax.zeta(f(1.000001), f(1.33))), 1000000.1357742485),
    ("zeta(inf, 0.62)", float(lax.zeta(f(np.inf), f(0.62))), np.inf),
]
bad = 0
for call, got, want in cases:
    ok = got == want or (np.isfinite(got) and abs(got - want) <= 0.01 * abs(want))
    bad += not ok
    print(f"{call} = {got:.6g}, expected {want:.6g}{'' if ok else '  <-- wrong'}")
print("fixed" if not bad else "still fails")
sys.exit(1 if bad else 0)
