"""Special functions against scipy.special in float64: lgamma, digamma, igamma,
igammac, igamma_grad_a, random_gamma_grad, erf, erfc, erf_inv, bessel_i0e, bessel_i1e,
regularized_incomplete_beta (betainc), polygamma, zeta. These are approximations, so
each op carries a looser tolerance as a compare Limitation."""
import numpy as np
import scipy.special as sp
from jax import lax

from farm.catalog import FLOAT, CustomArg, Limitation, RandArg, chlo_leak, define, np_dtype

FAMILY = "special"
SHAPE = (3, 4)


def _loose(rtol32: float, atol32: float, rtol64: float = 1e-9) -> list[Limitation]:
    """Looser than the default for float32; bf16/f16 get their own bound."""
    return [Limitation("approximation error of the f32 implementation", dtypes=("float32",), stage="compare",
                       tol=(rtol32, atol32)),
            Limitation("approximation error at half precision", dtypes=("bfloat16", "float16"), stage="compare",
                       tol=(6e-2, 6e-2)),
            Limitation("approximation error of the f64 implementation", dtypes=("float64",), stage="compare",
                       tol=(rtol64, 1e-12))]


def _uniform(lo: float, hi: float, name: str):
    def arg(dt: str) -> CustomArg:
        return CustomArg(f"{name}[{lo},{hi}]", lambda rng: rng.uniform(lo, hi, SHAPE).astype(np_dtype(dt)), SHAPE, dt)
    return arg


POS = _uniform(0.5, 5.0, "uniform")
UNIT = lambda dt: RandArg(SHAPE, dt, "unit")  # noqa: E731
ORDER = lambda dt: CustomArg("order_0_to_3", lambda rng: rng.integers(0, 4, SHAPE).astype(np_dtype(dt)), SHAPE, dt)  # noqa: E731
ZETA_X = _uniform(1.5, 5.0, "uniform")
BETA_X = _uniform(0.05, 0.95, "uniform")

# primitive: (lax fn, scipy reference, argument makers, (rtol, atol) for f32, chlo ops seen by the census)
OPS = {
    "lgamma": (lax.lgamma, sp.gammaln, (POS,), (1e-5, 1e-5), ("lgamma",)),
    "digamma": (lax.digamma, sp.digamma, (POS,), (1e-5, 1e-5), ("digamma",)),
    "igamma": (lax.igamma, sp.gammainc, (POS, POS), (5e-5, 5e-6), ("lgamma",)),
    "igammac": (lax.igammac, sp.gammaincc, (POS, POS), (5e-5, 5e-6), ("lgamma",)),
    "erf": (lax.erf, sp.erf, (lambda dt: RandArg(SHAPE, dt),), (1e-6, 1e-6), ("erf",)),
    "erfc": (lax.erfc, sp.erfc, (lambda dt: RandArg(SHAPE, dt),), (5e-6, 1e-6), ("erfc",)),
    "erf_inv": (lax.erf_inv, sp.erfinv, (UNIT,), (5e-6, 1e-6), ("erf_inv",)),
    "bessel_i0e": (lax.bessel_i0e, sp.i0e, (lambda dt: RandArg(SHAPE, dt),), (1e-6, 1e-6), ()),
    "bessel_i1e": (lax.bessel_i1e, sp.i1e, (lambda dt: RandArg(SHAPE, dt),), (1e-6, 1e-6), ("bessel_i1e",)),
    "regularized_incomplete_beta": (lax.betainc, sp.betainc, (POS, POS, BETA_X), (2e-4, 2e-5), ("lgamma",)),
    "polygamma": (lax.polygamma, sp.polygamma, (ORDER, POS), (5e-5, 1e-5), ("polygamma",)),
    "zeta": (lax.zeta, sp.zeta, (ZETA_X, POS), (5e-5, 1e-5), ("zeta",)),
    "igamma_grad_a": (lax.igamma_grad_a, None, (POS, POS), (1e-3, 1e-4), ("digamma", "lgamma")),
    "random_gamma_grad": (lax.random_gamma_grad, None, (POS, POS), (1e-3, 1e-4), ("digamma", "lgamma")),
}


def _igamma_grad_a(a, x, h=1e-6):
    """d/da of the regularized lower incomplete gamma, by central differences in float64."""
    return (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)


def _random_gamma_grad(a, sample):
    """d sample / d a for a Gamma(a, 1) sample, by implicit differentiation of its CDF."""
    return -_igamma_grad_a(a, sample) / (np.exp(-sample) * sample ** (a - 1) / sp.gamma(a))


REFS = {"igamma_grad_a": _igamma_grad_a, "random_gamma_grad": _random_gamma_grad}

for prim, (fn, ref, makers, tol32, chlo) in OPS.items():
    for dt in FLOAT:
        # The float64 references of the two gradients are finite differences (~1e-9 accurate).
        lims = _loose(*tol32, rtol64=1e-7 if prim in REFS else 1e-9)
        lims += [lim for op in chlo or () for lim in chlo_leak(op, dt)]
        define(FAMILY, prim, fn, [m(dt) for m in makers], dtype=dt, reference=ref or REFS[prim], limitations=lims)
