"""float32 lax.igamma / lax.igammac (regularized incomplete gamma P(a, x), Q(a, x)) at extreme
finite a: NaN for the largest float32 a (3.4e38; P = 0, Q = 1 there, and JAX itself gives 0 for
P at a = 1e30), and Q(a, x) for a tiny a is 1.0 (a = 1.2e-38, true 4.9e-39) or 2.7e-6
(a = 1e-30, true 4.1e-31): Q -> 0 as a -> 0 since Γ(a) grows without bound. P(a, x) at
a = 1.2e-38 (float32's smallest normal) is 0 where it is 1 (right at a = 1e-30), and
P(3.4e38, 3.4e38) and Q(3.4e38, 3.4e38) are NaN where they are 1/2 (P(a, a) -> 1/2 as a grows).

Found by `farm sweep --edges all` (igamma, igammac harnesses, a at edge values) and the api
catalog's scipy.special edge values judged against SciPy (the last three). No upstream
report found. Needs only jax and numpy. Exits 1 while any is wrong, 0 once fixed.
"""
import sys

import numpy as np
from jax import lax

f = np.float32
cases = [  # (call, value, what it should be, relative tolerance)
    ("igamma(3.4e38, 4.05)", float(lax.igamma(f(3.4e38), f(4.05))), 0.0),
    ("igammac(3.4e38, 4.05)", float(lax.igammac(f(3.4e38), f(4.05))), 1.0),
    ("igammac(1.2e-38, 0.648)", float(lax.igammac(f(1.1754944e-38), f(0.648))), 4.856e-39),
    ("igammac(1e-30, 0.648)", float(lax.igammac(f(1e-30), f(0.648))), 4.131e-31),
    ("igamma(1.2e-38, 0.5)", float(lax.igamma(f(1.1754944e-38), f(0.5))), 1.0),
    ("igamma(3.4e38, 3.4e38)", float(lax.igamma(f(3.4028235e38), f(3.4028235e38))), 0.5),
    ("igammac(3.4e38, 3.4e38)", float(lax.igammac(f(3.4028235e38), f(3.4028235e38))), 0.5),
]
bad = 0
for call, got, want in cases:
    ok = np.isfinite(got) and abs(got - want) <= 0.01 * abs(want) + 1e-37
    bad += not ok
    print(f"{call} = {got:.6g}, expected {want:.6g}{'' if ok else '  <-- wrong'}")
print("fixed" if not bad else "still fails")
sys.exit(1 if bad else 0)
