"""float32 jax.scipy.special.boxcox(x, lmbda) and boxcox1p on XLA:CPU:

- at lmbda = 1.2e-38 (float32's smallest normal) boxcox(2, lmbda) is 0 where it is log(2) = 0.693
  (and boxcox1p(1, lmbda) likewise): lmbda * log(x) is subnormal and XLA:CPU flushes it to 0
  before the expm1; at lmbda = 1e-30 it is right. scipy.special takes the lmbda -> 0 limit, log(x);
- boxcox(3.4e38, 1) = x - 1 = 3.4e38: JAX gives inf (and boxcox1p too).

Found by the api catalog's edge-value variants judged against scipy.special (docs/api.md). No
upstream report found. Needs only jax and numpy. Exits 1 while any is wrong, 0 once fixed.
"""
import sys

import jax
import jax.scipy.special as jsp
import numpy as np

jax.config.update("jax_platforms", "cpu")
f = np.float32
tiny, big = np.finfo(np.float32).tiny, np.finfo(np.float32).max
cases = [  # (call, value, what it should be)
    ("boxcox(2, 1.2e-38)", jax.jit(jsp.boxcox)(f(2.0), tiny), np.log(2.0)),
    ("boxcox1p(1, 1.2e-38)", jax.jit(jsp.boxcox1p)(f(1.0), tiny), np.log(2.0)),
    ("boxcox(3.4e38, 1)", jax.jit(jsp.boxcox)(big, f(1.0)), float(big)),
    ("boxcox1p(3.4e38, 1)", jax.jit(jsp.boxcox1p)(big, f(1.0)), float(big)),
]
print("jax", jax.__version__)
bad = 0
for call, got, want in cases:
    got = float(got)
    ok = abs(got - want) <= 1e-5 * abs(want)
    bad += not ok
    print(f"{call} = {got:.7g}, expected {want:.7g}{'' if ok else '  <-- wrong'}")
print("fixed" if not bad else "still fails")
sys.exit(1 if bad else 0)
