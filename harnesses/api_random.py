"""``jax.random``: each sampler draws 4,096 values from one fixed key (``farm.catalog.api.KEY``)
and is judged by a goodness-of-fit test against its ``scipy.stats`` distribution: the
Kolmogorov-Smirnov test (``scipy.stats.kstest``) for a continuous one, Pearson's chi-square
test (``scipy.stats.chisquare``) for a discrete one. The invariant is ``-log10(p)``; the bound
is 4 (p >= 1e-4: ``TOL``'s tenfold, ``farm.judge.tolerance``, kind ``invariant``). At a fixed key
the p-value is one number: a correct sampler passes every run, and one whose distribution is
off by a shift of a tenth of a standard deviation has p ~ 1e-20 with 4,096 draws
(tests/test_catalog_api.py). Key handling (``split``, ``fold_in``, ``key_data``...) is bits:
the jaxpr's evaluation judges it."""
import numpy as np
import scipy.stats as ss

from farm.catalog.api import declare, spec, without

N = 4096
TOL = (0.4, 0.4)
C = dict(kind="custom", edge=False)


def _p_to_err(p):
    return float(-np.log10(max(float(p), 1e-300)))


def ks(dist, transform=lambda x: x):
    """The invariant: a KS test of the (transformed) sample against ``dist``."""
    def inv(key, sample):
        return _p_to_err(ss.kstest(transform(np.asarray(sample, np.float64)).ravel(), dist.cdf).pvalue)
    inv.__qualname__ = f"ks({dist.dist.name})"
    return inv


def chi2(pmf, support, transform=lambda x: x):
    """The invariant: a chi-square test of the sample's counts on ``support`` against ``pmf``
    (values outside the support fail it outright)."""
    support = np.asarray(support)

    def inv(key, sample):
        x = transform(np.asarray(sample)).ravel()
        if not np.isin(x, support).all():
            return 300.0
        counts = np.array([(x == s).sum() for s in support], np.float64)
        expected = np.asarray(pmf(support), np.float64)
        expected = expected / expected.sum() * x.size
        keep = expected >= 5  # Pearson's test needs about 5 expected per bin: merge the tail
        obs = np.append(counts[keep], counts[~keep].sum())
        exp = np.append(expected[keep], expected[~keep].sum())
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        return _p_to_err(ss.chisquare(obs, exp).pvalue)
    return inv


def sampler(name, call, invariant, dtype="float32", tag=""):
    return spec(name, "key:uint32", shapes=(((2,),),), call=call, reference=None, invariant=invariant,
                dtypes=(dtype,), tol=TOL, tag=tag, **C)


def first(x):
    return x[..., 0]


#: The census's chlo ops per function (JAX #15608), measured on jax 0.12.0.1 (farm.catalog.api.chlo_limitations).
CHLO = {
    'ball': 'cpu,cuda,rocm,tpu: erf_inv',
    'beta': 'cpu,cuda,rocm,tpu: erf_inv',
    'chisquare': 'cpu,cuda,rocm,tpu: erf_inv',
    'dirichlet': 'cpu,cuda,rocm,tpu: erf_inv',
    'double_sided_maxwell': 'cpu,cuda,rocm,tpu: erf_inv',
    'f': 'cpu,cuda,rocm,tpu: erf_inv',
    'gamma': 'cpu,cuda,rocm,tpu: erf_inv',
    'generalized_normal': 'cpu,cuda,rocm,tpu: erf_inv',
    'loggamma': 'cpu,cuda,rocm,tpu: erf_inv',
    'lognormal': 'cpu,cuda,rocm,tpu: erf_inv',
    'maxwell': 'cpu,cuda,rocm,tpu: erf_inv',
    'multivariate_normal': 'cpu,cuda,rocm,tpu: erf_inv',
    'normal': 'cpu,cuda,rocm,tpu: erf_inv',
    'orthogonal': 'cpu,cuda,rocm,tpu: erf_inv',
    't': 'cpu,cuda,rocm,tpu: erf_inv',
    'wald': 'cpu,cuda,rocm,tpu: erf_inv',
    'truncated_normal': 'cpu,cuda,rocm,tpu: erf erf_inv next_after',
}
#: What the census finds otherwise on jax 0.10.2 (measured there: scripts/census_table.py): the
#: poisson sampler still lowers lgamma to chlo.lgamma.
CHLO_0_10_2 = {
    'poisson': 'cpu,cuda,rocm,tpu: lgamma',
}

SPECS = [
    sampler("uniform", lambda f, k: f(k, (N,)), ks(ss.uniform())),
    sampler("uniform", lambda f, k: f(k, (N,), minval=-2.0, maxval=3.0), ks(ss.uniform(-2, 5)), tag="range"),
    sampler("uniform", lambda f, k: f(k, (N,), dtype=np.float16), ks(ss.uniform()), dtype="float16", tag="f16"),
    sampler("normal", lambda f, k: f(k, (N,)), ks(ss.norm())),
    sampler("normal", lambda f, k: f(k, (N,), dtype="bfloat16"), ks(ss.norm()),
            dtype="bfloat16", tag="bf16"),
    sampler("beta", lambda f, k: f(k, 2.0, 3.0, (N,)), ks(ss.beta(2, 3))),
    sampler("cauchy", lambda f, k: f(k, (N,)), ks(ss.cauchy())),
    sampler("chisquare", lambda f, k: f(k, 3.0, (N,)), ks(ss.chi2(3))),
    sampler("dirichlet", lambda f, k: f(k, np.array([1.0, 2.0, 3.0], np.float32), (N,)), ks(ss.beta(1, 5), first)),
    sampler("double_sided_maxwell", lambda f, k: f(k, 0.0, 1.0, (N,)), ks(ss.maxwell(), np.abs)),
    sampler("exponential", lambda f, k: f(k, (N,)), ks(ss.expon())),
    sampler("f", lambda f, k: f(k, 4.0, 6.0, (N,)), ks(ss.f(4, 6))),
    sampler("gamma", lambda f, k: f(k, 2.5, (N,)), ks(ss.gamma(2.5))),
    sampler("gamma", lambda f, k: f(k, 0.3, (N,)), ks(ss.gamma(0.3)), tag="small_a"),
    sampler("generalized_normal", lambda f, k: f(k, 1.5, (N,)), ks(ss.gennorm(1.5))),
    sampler("gumbel", lambda f, k: f(k, (N,)), ks(ss.gumbel_r())),
    sampler("laplace", lambda f, k: f(k, (N,)), ks(ss.laplace())),
    sampler("loggamma", lambda f, k: f(k, 2.5, (N,)), ks(ss.loggamma(2.5))),
    sampler("logistic", lambda f, k: f(k, (N,)), ks(ss.logistic())),
    sampler("lognormal", lambda f, k: f(k, 0.5, (N,)), ks(ss.lognorm(0.5))),
    sampler("maxwell", lambda f, k: f(k, (N,)), ks(ss.maxwell())),
    sampler("multivariate_normal", lambda f, k: f(k, np.array([1.0, -1.0], np.float32),
                                                  np.array([[2.0, 0.5], [0.5, 1.0]], np.float32), (N,)),
            ks(ss.norm(1.0, np.sqrt(2.0)), first)),
    sampler("pareto", lambda f, k: f(k, 3.0, (N,)), ks(ss.pareto(3))),
    sampler("rayleigh", lambda f, k: f(k, 1.0, (N,)), ks(ss.rayleigh())),
    sampler("t", lambda f, k: f(k, 5.0, (N,)), ks(ss.t(5))),
    sampler("triangular", lambda f, k: f(k, 0.0, 0.3, 1.0, (N,)), ks(ss.triang(0.3))),
    sampler("truncated_normal", lambda f, k: f(k, -1.0, 2.0, (N,)), ks(ss.truncnorm(-1, 2))),
    sampler("wald", lambda f, k: f(k, 1.0, (N,)), ks(ss.invgauss(1.0))),
    sampler("weibull_min", lambda f, k: f(k, 1.0, 2.0, (N,)), ks(ss.weibull_min(2))),
    sampler("ball", lambda f, k: f(k, 3, shape=(N,)), ks(ss.uniform(), lambda x: np.linalg.norm(x, axis=-1) ** 3)),
    sampler("bits", lambda f, k: f(k, (N,)), ks(ss.uniform(), lambda x: x / 2.0 ** 32), dtype="uint32"),
    sampler("bernoulli", lambda f, k: f(k, 0.3, (N,)), chi2(lambda s: ss.bernoulli(0.3).pmf(s), [0, 1]), dtype="bool"),
    sampler("binomial", lambda f, k: f(k, 10.0, 0.3, (N,)), chi2(ss.binom(10, 0.3).pmf, np.arange(11))),
    sampler("categorical", lambda f, k: f(k, np.log(np.array([0.1, 0.2, 0.3, 0.4], np.float32)), shape=(N,)),
            chi2(lambda s: np.array([0.1, 0.2, 0.3, 0.4])[s], np.arange(4)), dtype="int32"),
    sampler("choice", lambda f, k: f(k, 10, (N,)), chi2(lambda s: np.full(s.shape, 0.1), np.arange(10)),
            dtype="int32"),
    sampler("geometric", lambda f, k: f(k, 0.3, (N,)), chi2(ss.geom(0.3).pmf, np.arange(1, 40)), dtype="int32"),
    sampler("multinomial", lambda f, k: f(k, 10.0, np.array([0.2, 0.3, 0.5], np.float32), shape=(N, 3)),
            chi2(ss.binom(10, 0.2).pmf, np.arange(11), first)),
    sampler("poisson", lambda f, k: f(k, 3.0, (N,)), chi2(ss.poisson(3).pmf, np.arange(20)), dtype="int32"),
    sampler("rademacher", lambda f, k: f(k, (N,)), chi2(lambda s: np.full(s.shape, 0.5), [-1, 1]), dtype="int32"),
    sampler("randint", lambda f, k: f(k, (N,), 0, 10), chi2(lambda s: np.full(s.shape, 0.1), np.arange(10)),
            dtype="int32"),
    sampler("permutation", lambda f, k: f(k, 64), lambda key, p: 0.0 if sorted(np.asarray(p).tolist())
            == list(range(64)) else 300.0, dtype="int32"),
    sampler("orthogonal", lambda f, k: f(k, 4, shape=(64,)),
            lambda key, q: float(np.max(np.abs(np.swapaxes(q, -1, -2) @ q - np.eye(4)))) * 1e4),
]

# keys: bits, judged by the jaxpr's evaluation of threefry
WHY = "deterministic bits (threefry2x32): the jaxpr's float64 evaluation judges them"
SPECS += [
    spec("split", "key:uint32", shapes=(((2,),),), reference=None, why=WHY, dtypes=("uint32",),
         variants=({}, {"num": 3}), **C),
    spec("fold_in", "key:uint32", shapes=(((2,),),), call=lambda f, k: f(k, 7), reference=None, why=WHY,
         dtypes=("uint32",), **C),
    spec("PRNGKey", "index", shapes=(((),),), reference=None, why=WHY, dtypes=("uint32",), **C),
    spec("key_data", "key:uint32", shapes=(((2,),),),
         call=lambda f, k: f(__import__("jax").random.wrap_key_data(k)), reference=None, why=WHY,
         dtypes=("uint32",), **C),
    spec("wrap_key_data", "key:uint32", shapes=(((2,),),),
         call=lambda f, k: __import__("jax").random.key_data(f(k)), reference=None, why=WHY, dtypes=("uint32",), **C),
    spec("key", "index", shapes=(((),),), call=lambda f, s: __import__("jax").random.key_data(f(s)), reference=None,
         why=WHY, dtypes=("uint32",), **C),
    spec("clone", "key:uint32", shapes=(((2,),),), call=lambda f, k: f(k), reference=None, why=WHY,
         dtypes=("uint32",), **C),
]
declare("random", SPECS, chlo=CHLO, chlo_on={"~=0.10.2": CHLO | CHLO_0_10_2})
without("random", {
    "Key": "a type alias for typed key arrays (annotations), not a computation",
    "key_impl": "not a computation: returns the PRNG implementation's description",
    "key_dtype": "not a computation: returns a dtype",
})
