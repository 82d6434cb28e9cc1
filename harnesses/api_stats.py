"""``jax.scipy.stats``: each distribution's functions against ``scipy.stats.<dist>`` in float64,
and the module's own functions (``mode``, ``rankdata``, ``sem``) against ``scipy.stats``."""
import importlib

import numpy as np
import scipy.stats as ss

from farm.catalog import Limitation
from farm.catalog.api import MAIN, declare, labels, public, spec, without
from farm.catalog.known import holds_on
from farm.platforms import LOWERING_PLATFORMS

#: distribution -> (the domain of x, of q (ppf/isf), the shape parameters' domains, a call
#: fixing parameters that must be integers)
DISTS = {
    "bernoulli": ("index", ("prob",)), "beta": ("prob", ("positive", "positive")),
    "betabinom": ("count", ("positive", "positive"), lambda f, k, a, b: f(k, 9, a, b)),
    "binom": ("count", ("prob",), lambda f, k, p: f(k, 9, p)), "cauchy": ("real", ()),
    "chi2": ("positive", ("positive",)), "expon": ("positive", ()), "gamma": ("positive", ("positive",)),
    "gennorm": ("real", ("positive",)), "geom": ("count", ("prob",)), "gumbel_l": ("real", ()),
    "gumbel_r": ("real", ()), "laplace": ("real", ()), "logistic": ("real", ()),
    "nbinom": ("count", ("positive", "prob")), "norm": ("real", ()), "pareto": ("gt1", ("positive",)),
    "poisson": ("count", ("positive",)), "t": ("real", ("positive",)),
    "truncnorm": ("small", (), lambda f, x: f(x, -1.5, 1.2)), "uniform": ("prob", ()),
    "vonmises": ("angle", ("positive",)), "wrapcauchy": ("positive", ("prob",)),
}

ALL = "cpu,cuda,rocm,tpu"
#: The census's chlo ops per distribution and function (JAX #15608), measured on jax 0.12.0.1
#: (farm.catalog.api.chlo_limitations).
CHLO = {
    "cauchy": {f: f"{ALL}: atan" for f in ("cdf", "logcdf", "logsf", "sf")},
    "norm": {"cdf": f"{ALL}: erf erfc", "sf": f"{ALL}: erf erfc", "logcdf": f"{ALL}: erf erfc square",
             "logsf": f"{ALL}: erf erfc square", "logpdf": f"{ALL}: square", "pdf": f"{ALL}: square"},
    "truncnorm": {f: f"{ALL}: erf erfc square" for f in ("cdf", "logcdf", "logpdf", "logsf", "pdf", "sf")},
    # rankdata's cuda/rocm modules do not abort XLA:CPU: crossexec finds a GPU-only custom call (not runnable here)
    "": {"mode": "cuda,rocm: scan (vjp aborts: its pullback holds the forward scan)", "rankdata": "cuda,rocm: scan (no abort)", "rankdata:ordinal": "", "sem": f"{ALL}: square"},
}
#: What the census finds otherwise on jax 0.10.2 (measured there: scripts/census_table.py): the
#: gamma family still lowers to chlo.lgamma, norm's ppf/isf to chlo.square, and no chlo.scan yet.
_LGAMMA = f"{ALL}: lgamma"
CHLO_0_10_2 = {
    **{d: dict.fromkeys(("cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"), _LGAMMA) for d in ("beta", "chi2", "gamma")},
    **{d: dict.fromkeys(("logpmf", "pmf"), _LGAMMA) for d in ("betabinom", "binom", "multinomial", "nbinom")},
    **{d: dict.fromkeys(("logpdf", "pdf"), _LGAMMA) for d in ("dirichlet", "t")},
    "gennorm": dict.fromkeys(("cdf", "logpdf", "pdf"), _LGAMMA),
    "poisson": dict.fromkeys(("cdf", "entropy", "logpmf", "pmf"), _LGAMMA),
    "norm": dict.fromkeys(("isf", "ppf"), f"{ALL}: square"),
    "": {"mode": "", "rankdata": ""},
}


def _census(dist: str) -> dict:
    """``declare``'s census data for a distribution (``""``: the scipy.stats functions)."""
    return dict(chlo=CHLO.get(dist, {}), chlo_on={"~=0.10.2": CHLO.get(dist, {}) | CHLO_0_10_2.get(dist, {})})

#: Found by this catalog under --vjp (docs/repros/xlogy_int_grad.py): jax's gumbel ppf calls
#: xlog1py(-1, ...) with a Python int, and xlogy/xlog1py's JVP rules multiply that argument's
#: float0 tangent: the gradient raises (jax 0.5.3 to 0.12.0.1 for xlogy; gumbel since its addition).
XLOG1PY_INT_GRAD = Limitation("jax.scipy.stats.gumbel_l/gumbel_r.ppf cannot be differentiated: they call "
                              "xlog1py(-1, ...) with an int, whose JVP rule multiplies a float0 tangent (TypeError; "
                              "docs/findings.md)", platforms=("export",), stage="vjp", status="error",
                              error=r"TypeError: Called multiply with a float0 array")
LIMITS = {("gumbel_l", "ppf"): (XLOG1PY_INT_GRAD,), ("gumbel_r", "ppf"): (XLOG1PY_INT_GRAD,)}
#: Found by this catalog's symbolic calls of its edge variants (docs/findings.md,
#: docs/repros/xla_cpu_exp_minus_contracted.py): XLA:CPU's exp fused with a subtraction loses its
#: overflow (x - exp(x) at +inf is +inf, not NaN), and whether a module gets that fusion depends on
#: its shapes: the symbolic export of gumbel_r.logpdf(-inf) is +inf where the static lowering gives NaN.
EXP_MINUS_FUSED = Limitation("finding: XLA:CPU's exp fused with a subtraction loses its overflow (x - exp(x) at +inf "
                             "is +inf, IEEE NaN), and the symbolic module gets that fusion where the static one does "
                             "not (docs/repros/xla_cpu_exp_minus_contracted.py)", platforms=LOWERING_PLATFORMS,
                             stage="symbolic_call", error="vs the static: [12] elements differ; max abs err inf",
                             jax=">=0.12")
EDGE_LIMITS = {("gumbel_l", "pdf"): (("x0", EXP_MINUS_FUSED),), ("gumbel_r", "pdf"): (("x0", EXP_MINUS_FUSED),),
               ("gumbel_r", "logpdf"): (("x0", EXP_MINUS_FUSED),)}

#: Edge values, judged against scipy.stats (``edge_reference="twin"``), each other operand drawn from
#: its own domain (``edge_others="domain"``). What they found is data: the distributions without
#: shape parameters (cauchy, expon, gumbel_l, gumbel_r, laplace, logistic, norm, uniform) in
#: ``farm.catalog.known.API_EDGE_VALUES`` (2026-12-02), those with them in
#: ``known.STATS_EDGE_VALUES`` (2026-12-03: 3,727 differing elements of 213 variants, every one in
#: a class: a parameter outside its domain, SciPy's discrete ppf(0), and JAX's findings: pmfs at a
#: non-integer k, a NaN x giving 0, the log of an underflowed probability, Q(a, x) at a small a,
#: pareto's cancellation, infinite/huge and tiny operands; docs/repros/stats_parameters.py), all on
#: jax 0.12.0.1. Before jax 0.12 (measured on 0.10.2) 11 of the 50 variants without shape
#: parameters differ otherwise (uniform's pdf and cdf, cauchy's ppf and isf, the gumbel pdfs...):
#: off there, not triaged on that line.
EDGED = frozenset(DISTS) if holds_on(">=0.12") else frozenset()

for dist, (x, params, *call) in DISTS.items():
    label = f"scipy.stats.{dist}"
    specs = []
    for fn in public(importlib.import_module(labels()[label])):
        if fn == "entropy":
            specs.append(spec(fn, "positive", cases=("main",), edge=False))
            continue
        first = "prob" if fn in ("ppf", "isf") else x
        kw = {"call": call[0]} if call else {}
        specs.append(spec(fn, first, *params, cases=("main",), edge=dist in EDGED, edge_reference="twin",
                          edge_others="domain", limitations=LIMITS.get((dist, fn), ()),
                          edge_limitations=EDGE_LIMITS.get((dist, fn), ()), **kw))
    declare(label, specs, **_census(dist))

C = dict(kind="custom", edge=False)


def _dirichlet(f, x, a):
    x = x / x.sum()
    return f(x, a)


declare("scipy.stats.dirichlet", [
    spec(fn, "positive", "positive", shapes=(((3,), (3,)),), call=_dirichlet, **C) for fn in ("pdf", "logpdf")], **_census("dirichlet"))
declare("scipy.stats.multinomial", [
    # jax's multinomial takes integer counts only (its docstring); scipy's any
    spec(fn, "count:int32", "prob", shapes=(((3,), (3,)),), call=lambda f, x, p: f(x, x.sum(), p / p.sum()), **C)
    for fn in ("pmf", "logpmf")], **_census("multinomial"))
declare("scipy.stats.multivariate_normal", [
    spec(fn, "real", "real", "spd", shapes=(((5, 3), (3,), (3, 3)),), **C) for fn in ("pdf", "logpdf")],
    **_census("multivariate_normal"))
declare("scipy.stats", [
    spec("mode", "count", shapes=((MAIN,),), variants=({"axis": 0}, {"axis": None}), **C),
    spec("rankdata", "count", shapes=(((9,),), (MAIN,)), variants=({}, {"method": "min"}, {"method": "dense"}), **C),
    spec("rankdata", "count", shapes=(((9,),),), variants=({"method": "ordinal"},), tag="ordinal", **C),
    spec("sem", "real", shapes=((MAIN,),), variants=({}, {"axis": None}, {"ddof": 0}), **C),
], **_census(""))
without("scipy.stats", {})
