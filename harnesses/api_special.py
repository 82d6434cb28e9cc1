"""``jax.scipy.special`` against ``scipy.special`` in float64."""
import numpy as np
import scipy.special as sp

from farm.catalog import Limitation
from farm.catalog.api import MAIN, declare, spec, without
from farm.catalog.known import holds_on
from farm.platforms import LOWERING_PLATFORMS

LABEL = "scipy.special"

ELEMENTWISE = {  # name: (operand domains, domain edges)
    "beta": (("positive", "positive"), (0.0, -1.0)), "betainc": (("positive", "positive", "prob"), (0.0, 1.0)),
    "betaln": (("positive", "positive"), (0.0,)), "boxcox": (("positive", "small"), (0.0,)),
    "boxcox1p": (("positive", "small"), (-1.0,)), "dawsn": (("real",), ()), "digamma": (("positive",), (0.0, -1.0)),
    "entr": (("positive",), (0.0,)), "erf": (("real",), ()), "erfc": (("real",), ()),
    "erfcinv": (("prob",), (0.0, 2.0, 1.0)), "erfcx": (("real",), ()), "erfinv": (("unit",), (1.0, -1.0)),
    "exp1": (("positive",), (0.0,)), "expi": (("nonzero",), (0.0,)), "expit": (("real",), ()),
    "gamma": (("positive",), (0.0, -1.0, -2.0)), "gammainc": (("positive", "positive"), (0.0,)),
    "gammaincc": (("positive", "positive"), (0.0,)), "gammaln": (("positive",), (0.0, -1.0)),
    "gammasgn": (("real",), (0.0, -1.0)), "i0": (("real",), ()), "i0e": (("real",), ()), "i1": (("real",), ()),
    "i1e": (("real",), ()), "kl_div": (("positive", "positive"), (0.0,)), "log_ndtr": (("real",), ()),
    "loggamma": (("positive",), (0.0,)), "logit": (("prob",), (0.0, 1.0)), "ndtr": (("real",), ()),
    "ndtri": (("prob",), (0.0, 1.0)), "owens_t": (("real", "real"), ()), "poch": (("positive", "small"), ()),
    "rel_entr": (("positive", "positive"), (0.0,)), "spence": (("positive",), (0.0, 1.0)),
    "xlog1py": (("real", "positive"), (-1.0, 0.0)), "xlogy": (("real", "positive"), (0.0,)),
    "zeta": (("gt1", "positive"), (1.0,)), "hyp1f1": (("small", "positive", "small"), ()),
    "hyp2f1": (("small", "small", "positive", "unit"), (1.0,)),
    "factorial": (("count",), ()), "comb": (("count", "count"), ()),
    "fresnel": (("real",), ()), "sici": (("positive",), ()),
}

#: The census's chlo ops per function (JAX #15608), measured on jax 0.12.0.1 (farm.catalog.api.chlo_limitations).
CHLO = {
    'dawsn': 'cpu,cuda,rocm,tpu: square',
    'digamma': 'cpu,cuda,rocm,tpu: digamma',
    'erf': 'cpu,cuda,rocm,tpu: erf',
    'erfc': 'cpu,cuda,rocm,tpu: erfc',
    'erfcx': 'cpu,cuda,rocm,tpu: square',
    'erfinv': 'cpu,cuda,rocm,tpu: erf_inv',
    'exp1': 'cuda,rocm: scan (vjp aborts: its pullback holds the forward scan)',
    'exp1@empty': 'cuda,rocm: scan (no abort: an empty module)',
    'expi': 'cuda,rocm: scan',
    'expi@empty': 'cuda,rocm: scan (no abort: an empty module)',
    'expn': 'cuda,rocm: scan (vjp aborts: its pullback holds the forward scan)',
    'expn@empty': 'cuda,rocm: scan (no abort: an empty module)',
    'spence': 'cuda,rocm: scan (vjp aborts: its pullback holds the forward scan)',
    'spence@empty': 'cuda,rocm: scan (no abort: an empty module)',
    'sph_harm_y': 'cuda,rocm: scan',
    'hyp2f1': 'cpu,cuda,rocm,tpu: digamma',
    'i1': 'cpu,cuda,rocm,tpu: bessel_i1e',
    'i1e': 'cpu,cuda,rocm,tpu: bessel_i1e',
    'log_ndtr': 'cpu,cuda,rocm,tpu: erf erfc square',
    'ndtr': 'cpu,cuda,rocm,tpu: erf erfc',
    'owens_t': 'cpu,cuda,rocm,tpu: atan erf erfc square',
    'owens_t@empty': '',
    'zeta': 'cpu,cuda,rocm,tpu: zeta',
}
#: What the census finds otherwise on jax 0.10.2 (measured there: scripts/census_table.py): the
#: gamma family still lowers to chlo.lgamma, ndtri and erfcx to chlo.square, and no chlo.scan yet.
CHLO_0_10_2 = {
    'beta': 'cpu,cuda,rocm,tpu: lgamma',
    'betainc': 'cpu,cuda,rocm,tpu: lgamma',
    'betaln': 'cpu,cuda,rocm,tpu: lgamma',
    'comb': 'cpu,cuda,rocm,tpu: lgamma',
    'erfcx': 'cpu,cuda,rocm,tpu: erfc square',
    'exp1': 'cpu,cuda,rocm,tpu: lgamma',
    'exp1/float32': 'cpu,cuda,rocm,tpu: lgamma',
    'exp1/float32@empty': 'cpu,cuda,rocm,tpu: lgamma',
    'expi': 'cpu,cuda,rocm,tpu: lgamma',
    'expi/float32': 'cpu,cuda,rocm,tpu: lgamma',
    'expi/float32@empty': 'cpu,cuda,rocm,tpu: lgamma',
    'expn': 'cpu,cuda,rocm,tpu: lgamma',
    'expn/float32': 'cpu,cuda,rocm,tpu: lgamma',
    'expn/float32@empty': 'cpu,cuda,rocm,tpu: lgamma',
    'factorial': 'cpu,cuda,rocm,tpu: lgamma',
    'factorial/float32@empty': '',
    'gamma': 'cpu,cuda,rocm,tpu: lgamma',
    'gammainc': 'cpu,cuda,rocm,tpu: lgamma',
    'gammaincc': 'cpu,cuda,rocm,tpu: lgamma',
    'gammaln': 'cpu,cuda,rocm,tpu: lgamma',
    'hyp1f1': 'cpu,cuda,rocm,tpu: lgamma',
    'hyp2f1': 'cpu,cuda,rocm,tpu: digamma lgamma',
    'log_ndtr': 'cpu,cuda,rocm,tpu: erf erfc square',
    'log_ndtr/float32@empty': 'cpu,cuda,rocm,tpu: erf erfc',
    'loggamma': 'cpu,cuda,rocm,tpu: lgamma',
    'multigammaln': 'cpu,cuda,rocm,tpu: lgamma',
    'ndtri': 'cpu,cuda,rocm,tpu: square',
    'ndtri/float32@empty': '',
    'poch': 'cpu,cuda,rocm,tpu: lgamma',
    'poch/float32@empty': '',
    'polygamma': 'cpu,cuda,rocm,tpu: polygamma',
    'spence': '',
    'spence/float32': '',
    'spence/float32@empty': '',
    'sph_harm_y': '',
}

#: Found by this catalog (docs/repros/bessel_jn_default_n_iter_nan.py): with the default n_iter=50 the
#: backward recurrence overflows float32 for |z| <~ 2: NaN.
BESSEL_JN_NAN = Limitation("bessel_jn's default n_iter=50 overflows float32 for |z| <~ 2: NaN", platforms=("cpu",),
                           stage="compare", error="elements differ")
#: The same NaN in its derivative (``--vjp``): the vjp runs the same recurrence on every platform's module.
BESSEL_JN_NAN_VJP = Limitation("bessel_jn's default n_iter=50 overflows float32 for |z| <~ 2: NaN in its vjp too",
                               platforms=LOWERING_PLATFORMS, stage="vjp", status="fail", error=r"the artifact's nan")
#: The edge-value variants of scipy.special (each operand at its dtype's edge values) are judged
#: against the SciPy twin (``edge_reference="twin"``); what JAX and SciPy do differently there, as
#: conventions and findings, is ``farm.catalog.known.API_EDGE_VALUES`` (triaged 2026-12-02, jax
#: 0.12.0.1: docs/api.md). hyp2f1's first three operands' and all four's never return for an
#: infinite or huge a (docs/repros/hyp2f1_huge_parameter_hangs.py): a hang is a timeout no data can
#: expect, so only z's edge values run (as gcd's are off).
EDGE_CASES = {"hyp2f1": ("x3",)}
#: On jax before 0.12 (measured on 0.10.2) exp1's, expn's and gammainc's edge values never return
#: (timeouts), kl_div's and rel_entr's differ at two edge values together, and against SciPy comb,
#: expi and gammaincc differ at more of them than on 0.12: off there (not triaged on that line).
OFF_BEFORE_0_12 = frozenset({"exp1", "expn", "kl_div", "rel_entr", "gammainc", "gammaincc", "comb", "expi"}) \
    if holds_on("<0.12") else frozenset()
#: the main case and an empty array (size 1 and broadcasting are jnp's: the sweep's time budget)
CASES = ("main", "empty")
SPECS = [spec(n, *doms, edge=n not in OFF_BEFORE_0_12, edge_values=edges, edge_reference="twin", cases=CASES,
             edge_cases=EDGE_CASES.get(n, ())) for n, (doms, edges) in ELEMENTWISE.items()]
SPECS += [
    spec("expn", "count:int32", "positive", edge="expn" not in OFF_BEFORE_0_12, edge_reference="twin", cases=CASES),
    # jax's polygamma takes an integer n only (its docstring); scipy's any real n
    # the band its compare holds it to against SciPy, declared so that its symbolic calls, judged by
    # the float64 jaxpr, use it too: its float32 series is 2.8e-6 off its own float64 evaluation
    spec("polygamma", "count:int32", "positive", edge=True, edge_reference="twin", cases=CASES, tol=(2e-5, 1e-6)),
    spec("multigammaln", "gt1", kind="custom", shapes=((MAIN,),), call=lambda f, a: f(a + 1.0, 3), edge=False),
    spec("bernoulli", kind="custom", shapes=(((1,),),), call=lambda f, x: f(8), edge=False),
    spec("bessel_jn", "real", kind="custom", shapes=(((9,),),), call=lambda f, z: f(z, v=3)
         if f.__module__.startswith("jax") else f(z), reference=lambda z: np.stack([sp.jv(k, z) for k in range(4)]),
         limitations=(BESSEL_JN_NAN, BESSEL_JN_NAN_VJP), edge=False),
    spec("sph_harm_y", "index", "index", "angle", "angle", kind="custom", shapes=(((5,),) * 4,),
         call=lambda f, n, m, t, p: f(n + 1, m, t, p, n_max=4) if f.__module__.startswith("jax")
         else f(n + 1, m, t, p), edge=False),
    spec("wofz", "real", dtypes=("complex64",), cases=("main", "one"), edge=False),
    spec("logsumexp", kind="reduction", variants=({}, {"axis": -1}, {"axis": 0, "keepdims": True}),
         empty=False),
    spec("logsumexp", "real", "positive", kind="custom", shapes=((MAIN, MAIN),), tag="b", edge=False,
         call=lambda f, a, b: f(a, b=b, axis=0)),
    spec("softmax", kind="reduction", variants=({}, {"axis": 0}), empty=False),
    spec("log_softmax", kind="reduction", variants=({}, {"axis": 0}), empty=False),
]

declare(LABEL, SPECS, chlo=CHLO, chlo_on={"~=0.10.2": CHLO | CHLO_0_10_2})
without(LABEL, {})
