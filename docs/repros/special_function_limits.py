"""float32 jax.scipy.special functions that are NaN (or far off) where an argument is infinite,
the largest finite value or a pole and the answer is a limit:

- beta(inf, 0.5) = 0 and beta(3.4e38, 3.4e38) = 0: JAX NaN (lgamma(inf) - lgamma(inf)); beta(-0, 1)
  = inf: JAX -inf; beta(-1, 1) = -1 (the poles cancel): JAX NaN (jax-ml/jax#38270, open);
- betaln(inf, 0.5) = -inf: JAX NaN (jax-ml/jax#39106, open); betaln(-2, 1) = log(1/2): JAX NaN
  (jax-ml/jax#38243, open); betaln(3.4e38, 1.3) = -115.45: JAX -114.15 (1% off; right at 1e36);
- poch(inf, 0.5) = inf: JAX NaN;
- owens_t(0, inf) = 1/4: JAX NaN (right at h = 0.5).

The values are scipy.special's in float64 (and the limits' closed forms). Found by the api
catalog's edge-value variants judged against SciPy (docs/api.md). No upstream report found for
poch, owens_t or betaln's accuracy.
Needs only jax and numpy. Exits 1 while any is wrong, 0 once fixed.
"""
import sys

import jax
import jax.scipy.special as jsp
import numpy as np

jax.config.update("jax_platforms", "cpu")
f = np.float32
big = np.finfo(np.float32).max
cases = [  # (call, value, what it should be)
    ("beta(inf, 0.5)", jax.jit(jsp.beta)(f(np.inf), f(0.5)), 0.0),
    ("beta(3.4e38, 3.4e38)", jax.jit(jsp.beta)(big, big), 0.0),
    ("beta(-0, 1)", jax.jit(jsp.beta)(f(-0.0), f(1.0)), np.inf),
    ("beta(-1, 1)", jax.jit(jsp.beta)(f(-1.0), f(1.0)), -1.0),
    ("betaln(-2, 1)", jax.jit(jsp.betaln)(f(-2.0), f(1.0)), float(np.log(0.5))),
    ("betaln(inf, 0.5)", jax.jit(jsp.betaln)(f(np.inf), f(0.5)), -np.inf),
    ("betaln(3.4e38, 1.3)", jax.jit(jsp.betaln)(big, f(1.3)), -115.4478613),
    ("poch(inf, 0.5)", jax.jit(jsp.poch)(f(np.inf), f(0.5)), np.inf),
    ("owens_t(0, inf)", jax.jit(jsp.owens_t)(f(0.0), f(np.inf)), 0.25),
]
print("jax", jax.__version__)
bad = 0
for call, got, want in cases:
    got = float(got)
    ok = got == want or (np.isfinite(want) and abs(got - want) <= 1e-4 * abs(want) + 1e-30)
    bad += not ok
    print(f"{call} = {got:.7g}, expected {want:.7g}{'' if ok else '  <-- wrong'}")
print("fixed" if not bad else "still fails")
sys.exit(1 if bad else 0)
