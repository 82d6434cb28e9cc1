"""float32 jax.scipy.stats functions with shape parameters, wrong where scipy.stats (float64,
rounded to float32) has an answer:

- a pmf at a non-integer k is 0 (the distributions are on the integers; poisson's pmf says so),
  but bernoulli, binom, betabinom, geom and nbinom evaluate their formula: geom.pmf(0.5, 1) is
  inf, binom.logpmf(0.5, 9, 0.6) is -6.85 (-inf);
- a NaN x gives 0 or -inf (the support check reads NaN as outside), not NaN: binom, gamma,
  poisson and wrapcauchy's pdf/pmf and their logs;
- the log-probabilities take the log of the float32 probability: where it underflows, -inf
  though the log is representable (chi2.logcdf(2.62, 100) is -136.27; beta.logsf(0.63, 2.62, 100)
  -93.43; t.logpdf(0, 1.2e-38) -44.36);
- Q(a, x) for a small a (below about 1e-5) is 1 - P(a, x), which cancels: gamma.sf(0.5, 1.2e-7)
  is -3.6e-7 (negative) where it is 6.7e-8, chi2.sf(1.2e-7, 1.2e-7) twice its value, and the logs NaN;
- pareto.logcdf near x = 1 cancels in 1 - x^-b: the cdf 9% off at x = 1 + 2^-23;
- an infinite or huge parameter gives NaN, inf or garbage where the answer is a limit:
  t.pdf(x, df=inf) is norm.pdf(x) (NaN), gamma.cdf(3.67, 3.4e38) and poisson.cdf(3.4e38, 3.67) are
  0 and 1 (NaN), pareto.logpdf(4.67, 3.4e38) is -inf (inf), gennorm.pdf(0.88, 3.4e38) is 1/2 (0),
  vonmises.logpdf(1.2e-7, 3.4e38) is -2.4e24 (43.4);
- a parameter at float32's smallest normal (1.2e-38) is flushed in the intermediates
  (chi2.logcdf(1.2e-38, 1) is -43.89: -inf).

Expected values: scipy.stats in float64. Found by the api catalog's edge-value variants of the
distributions with shape parameters, judged against scipy.stats (docs/api.md). No upstream
report found for these (issues corpus searched for each class; jax-ml/jax#38316, chi2.logpdf NaN at
x = 0 for df = 2, is another, not drawn here). Wrong on jax 0.10.2 and 0.12.0.1 alike (bare venvs). Needs jax (and its scipy). Exits 1 while
any is wrong, 0 once every one is fixed.
"""
import sys

import jax
import jax.scipy.stats as jst
import numpy as np
import scipy.stats as ss

jax.config.update("jax_platforms", "cpu")
f = np.float32
big, tiny, eps = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny), 2.0 ** -23
inf, nan = np.inf, np.nan
cases = [  # (distribution, function, arguments)
    ("geom", "pmf", (0.5, 1.0)), ("binom", "logpmf", (0.5, 9, 0.6)), ("bernoulli", "pmf", (0.5, 0.6)),
    ("nbinom", "pmf", (0.5, 2.5, 0.6)), ("betabinom", "pmf", (0.5, 9, 2.5, 2.5)),
    ("binom", "pmf", (nan, 9, 0.43)), ("gamma", "pdf", (nan, 1.74)), ("poisson", "logpmf", (nan, 1.74)),
    ("wrapcauchy", "pdf", (nan, 0.43)),
    ("chi2", "logcdf", (2.62, 100.0)), ("beta", "logsf", (0.63, 2.62, 100.0)), ("t", "logpdf", (0.0, tiny)),
    ("gamma", "sf", (0.5, 1.2e-7)), ("chi2", "sf", (1.2e-7, 1.2e-7)), ("gamma", "logsf", (0.5, 1.2e-7)),
    ("pareto", "logcdf", (1 + eps, 1.82)),
    ("t", "pdf", (1.99, inf)), ("gamma", "cdf", (3.67, big)), ("poisson", "cdf", (big, 3.67)),
    ("pareto", "logpdf", (4.67, big)), ("gennorm", "pdf", (0.88, big)), ("vonmises", "logpdf", (1.2e-7, big)),
    ("chi2", "logcdf", (tiny, 1.0)),
]
print("jax", jax.__version__)
bad = 0
for dist, fn, args in cases:
    x32 = [f(a) for a in args]
    got = float(jax.jit(getattr(getattr(jst, dist), fn))(*x32))
    with np.errstate(all="ignore"):
        want = float(np.float32(getattr(getattr(ss, dist), fn)(*[float(a) for a in x32])))
    ok = (np.isnan(got) and np.isnan(want)) or got == want or (
        np.isfinite(want) and abs(got - want) <= 1e-3 * abs(want) + 1e-30)
    bad += not ok
    print(f"{dist}.{fn}{tuple(float(a) for a in x32)} = {got:.7g}, expected {want:.7g}{'' if ok else '  <-- wrong'}")
print("fixed" if not bad else f"{bad} of {len(cases)} still wrong")
sys.exit(1 if bad else 0)
