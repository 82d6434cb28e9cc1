"""float32 jax.scipy.stats functions wrong in the tails and at the ends of [0, 1]:

- cauchy.logcdf(x) for x -> -inf is log(1/2 + atan(x)/pi), which cancels: logcdf(-3.4e38) is
  -89.87 and logcdf(-inf) is -inf; under jit JAX gives -18.89 for both (eagerly -inf for both:
  the compiled fusion rounds atan(x)/pi otherwise); logsf likewise at +x;
- cauchy.logpdf(3.4e38) is -log(pi) - log1p(x^2) = -178.59: JAX -inf (x^2 overflows);
- gumbel_r.logsf(100) is log(1 - exp(-exp(-100))) = -100: JAX -inf (exp(-exp(-x)) rounds to 1);
- gumbel_l.ppf and gumbel_r.ppf at q = 0 and q = 1 are -inf and inf: JAX NaN (reported upstream:
  jax-ml/jax#38318, open, with a fix proposed in #38436).

The expected values are closed forms in float64 (scipy.stats agrees). Found by the api
catalog's edge-value variants judged against scipy.stats (docs/api.md). No upstream report
found for the cauchy and gumbel_r.logsf tails (issues corpus searched). Needs only jax and numpy. Exits 1 while any is wrong, 0 once fixed.
"""
import sys

import jax
import jax.scipy.stats as jst
import numpy as np

jax.config.update("jax_platforms", "cpu")
f = np.float32
big = float(np.finfo(np.float32).max)
cases = [  # (call, value under jit, what it should be)
    ("cauchy.logcdf(-3.4e38)", jax.jit(jst.cauchy.logcdf)(f(-big)), np.log(np.arctan(1 / big) / np.pi)),
    ("cauchy.logcdf(-inf)", jax.jit(jst.cauchy.logcdf)(f(-np.inf)), -np.inf),
    ("cauchy.logsf(3.4e38)", jax.jit(jst.cauchy.logsf)(f(big)), np.log(np.arctan(1 / big) / np.pi)),
    ("cauchy.logpdf(3.4e38)", jax.jit(jst.cauchy.logpdf)(f(big)), -np.log(np.pi) - 2 * np.log(big)),
    ("gumbel_r.logsf(100)", jax.jit(jst.gumbel_r.logsf)(f(100.0)), -100.0),
    ("gumbel_l.ppf(0)", jax.jit(jst.gumbel_l.ppf)(f(0.0)), -np.inf),
    ("gumbel_l.ppf(1)", jax.jit(jst.gumbel_l.ppf)(f(1.0)), np.inf),
    ("gumbel_r.ppf(0)", jax.jit(jst.gumbel_r.ppf)(f(0.0)), -np.inf),
    ("gumbel_r.ppf(1)", jax.jit(jst.gumbel_r.ppf)(f(1.0)), np.inf),
]
print("jax", jax.__version__)
bad = 0
for call, got, want in cases:
    got = float(got)
    ok = got == want or (np.isfinite(want) and abs(got - want) <= 1e-4 * abs(want))
    bad += not ok
    print(f"{call} = {got:.7g}, expected {want:.7g}{'' if ok else '  <-- wrong'}")
print("fixed" if not bad else "still fails")
sys.exit(1 if bad else 0)
