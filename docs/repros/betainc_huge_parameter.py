"""lax.betainc(a, b, x) (the regularized incomplete beta I_x(a, b)) is NaN for a huge finite a,
where it is 0 for x < 1 (the mass moves to x = 1 as a grows); JAX itself gives 0 at a = 1e10
and at a = inf, and NaN in between (3.4e38, the largest float32). The same for a huge b (3.4e38:
the value is 1), and for a tiny b (1.2e-38) it is -1.2e-7, outside [0, 1] (true 1.6e-38).

Found by `farm sweep --edges` (regularized_incomplete_beta, the a operand at the largest finite
value). No upstream report found. Needs only jax, numpy (SciPy, if present, is printed for
comparison). Exits 1 while the bug is there, 0 once fixed.
"""
import sys

import numpy as np
from jax import lax

b, x = np.float32(4.4375), np.float32(0.914)
rows = [(np.float32(a), float(lax.betainc(np.float32(a), b, x))) for a in (1e10, 1e30, 3.4e38, np.inf)]
for a, v in rows:
    print(f"lax.betainc({a:.3g}, {b}, {x}) = {v}")
try:
    import scipy.special as sp
    print("scipy.special.betainc(3.4e38, 4.4375, 0.914) =", sp.betainc(3.4e38, 4.4375, 0.914))
except ImportError:
    pass
extra = [("betainc(3.95, 3.4e38, 0.0856)", float(lax.betainc(np.float32(3.95), np.float32(3.4e38), np.float32(0.0856))), 1.0),
         ("betainc(2.48, 1.2e-38, 0.917)", float(lax.betainc(np.float32(2.48), np.float32(1.1754944e-38),
                                                             np.float32(0.917))), 1.575e-38)]
for call, v, want in extra:
    print(f"lax.{call} = {v} (expected {want})")
ok = all(v == 0.0 for _, v in rows) and all(np.isfinite(v) and 0.0 <= v <= 1.0 and abs(v - w) <= 1e-6
                                            for _, v, w in extra)
print("fixed" if ok else "still fails: expected 0 for every a (x < 1)")
sys.exit(0 if ok else 1)
