"""float32 jax.scipy.special functions that are NaN (or far off) where an argument is infinite or
the largest finite value and the answer is a limit:

- beta(inf, 0.5) = 0 and beta(3.4e38, 3.4e38) = 0: JAX NaN (lgamma(inf) - lgamma(inf));
- betaln(inf, 0.5) = -inf: JAX NaN; betaln(3.4e38, 1.3) = -115.45: JAX -114.15 (1% off; right at 1e36);
- poch(inf, 0.5) = inf: JAX NaN;
- owens_t(0, inf) = 1/4: JAX NaN (right at h = 0.5).

The values are scipy.special's in float64 (and the limits' closed forms). Found by the api
catalog's edge-value variants judged against SciPy (docs/api.md). No upstream report found.
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
