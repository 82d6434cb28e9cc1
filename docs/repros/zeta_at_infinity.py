"""lax.zeta(s, +inf) (Hurwitz ζ) is NaN for s > 1, where it is 0 (every term vanishes).

Found by `farm sweep --edges` (zeta harnesses, the q operand at +inf). Known upstream:
jax-ml/jax#38637 (fix proposed in #38647). Needs only jax and numpy. Exits 1 while the bug is
there, 0 once fixed.
"""
import sys

import numpy as np
from jax import lax

s = np.array([1.5, 2.0, 4.5], np.float32)
q = np.full(3, np.inf, np.float32)
got = np.asarray(lax.zeta(s, q))
print("lax.zeta([1.5, 2, 4.5], inf):", got.tolist(), "expected [0.0, 0.0, 0.0]")
ok = bool(np.all(got == 0.0))
print("fixed" if ok else "still fails")
sys.exit(0 if ok else 1)
