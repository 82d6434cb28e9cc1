"""Known upstream issues (JAX, XLA), as data, in one place, for every catalog.

A harness's own ``Limitation`` says "this harness is known to fail here" and is flagged
(``unexpected_pass``) when it stops failing. Some gaps are JAX's, whatever the catalog:
JAX's own catalog and JAX's shape_poly tests carry no farm limitations, so the same
known gap there was a ``fail`` in every clean sweep. A ``KnownIssue`` explains such a
failure in any catalog, but only the very failure it names (its primitives, its ``error``
pattern): a new chlo op crossing the plugin boundary is still a ``fail``. It never flags a pass: it is
not a claim about any one harness.

``STALE_UPSTREAM``: limitations in JAX's own catalog that no longer hold on the jax the
farm tests, each checked by a sweep; dropped from the adapted harnesses so that the
stale claim is not an ``unexpected_pass`` in every clean sweep (if the gap comes back,
the harness fails again and says so).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
import functools
import re
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np


@functools.cache
def running_jax() -> str:
    """The version of the jax this process runs (the imported module's: a bisection's jax tree
    over a fixed jaxlib is not the installed distribution)."""
    mod = sys.modules.get("jax")
    if mod is None:
        import jax as mod
    return mod.__version__


@functools.cache
def _specifier(spec: str) -> Any:
    """``spec`` parsed once (``packaging`` imported only for a gap that names versions: a
    standalone worker's host may lack it otherwise); raises where it is not PEP 440."""
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(spec)


def holds_on(spec: str, version: str | None = None) -> bool:
    """Whether a known gap's jax versions (a PEP 440 specifier, "<0.12", or several joined by
    ``||``, any of which holds: "~=0.12.0 || ~=0.10.2", versions measured apart; "": every
    version) include ``version`` (default: the running jax). Asked for every record a
    limitation may judge, so each specifier is parsed once."""
    if not spec:
        return True
    v = version or running_jax()
    return any(_specifier(one.strip()).contains(v, prereleases=True) for one in spec.split("||"))


def check_spec(spec: str) -> None:
    """Raise where a known gap's jax versions are not PEP 440 specifiers (joined by ``||``)."""
    for one in spec.split("||") if spec else ():
        if not one.strip():
            raise ValueError(f"an empty specifier in {spec!r}")
        _specifier(one.strip())

def lacking(needs: tuple[tuple[str, str], ...]) -> str | None:
    """What a harness calls that the running jax lacks: of its ``needs``, (API, the jax versions
    that have it), the first whose versions exclude this one, said as the reason it is skipped;
    None: it has them all."""
    for api, spec in needs:
        if not holds_on(spec):
            return f"jax {running_jax()} lacks {api} (jax{spec} has it)"
    return None


#: Per primitive (a harness key's primitive: JAX's catalog's group), the ops JAX lowers it to
#: that are non-StableHLO ``chlo`` ops and so cross the plugin boundary (JAX #15608), on every
#: platform. Measured by the census on jax 0.10.2 over the farm and the upstream catalogs.
#: A known op in another primitive (a planted tanh -> chlo.sinh) is still a ``fail``.
CHLO_LEAKS: dict[str, frozenset[str]] = {p: frozenset(ops) for p, ops in {
    **{p: (p,) for p in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "bessel_i1e", "cosh", "digamma", "erf",
                         "erf_inv", "erfc", "lgamma", "polygamma", "sinh", "square", "top_k", "zeta")},
    "igamma": ("lgamma",), "igammac": ("lgamma",), "regularized_incomplete_beta": ("lgamma",),
    "nextafter": ("next_after",), "random_gamma": ("erf_inv",), "normal": ("erf_inv",), "var": ("square",),
    "svd": ("conj",), "triangular_solve": ("conj",),  # svd: the tpu lowering of complex inputs; conjugate_a=True
}.items()}

CHLO_URL = "https://github.com/jax-ml/jax/issues/15608"

#: Where a leak above is gone, and from which jax on: op -> (platforms, dtypes, first jax
#: without it); empty platforms or dtypes: all. Measured by ``farm sweep --jax 0.12.0.1``'s
#: census against 0.10.2 (docs/versions.md): 0.12 lowers real asin on cpu and tpu, and lgamma
#: (igamma, igammac, regularized_incomplete_beta with it) below float64, without the chlo op.
CHLO_GONE: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "asin": (("cpu", "tpu"), ("bfloat16", "float16", "float32", "float64"), "0.12"),
    "lgamma": ((), ("bfloat16", "float16", "float32"), "0.12"),
}

#: Where a leak above came in later than the oldest supported jax: op -> the jax versions that
#: lower through it. jax 0.8.1 lowers square through chlo.square (jax-ml/jax 8ab31d1, "lax.square:
#: use chlo.square"; 0.8.0 and before multiply); 0.5.3's census had no chlo.square.
CHLO_SINCE: dict[str, str] = {"square": ">=0.8.1"}
assert not CHLO_SINCE.keys() & CHLO_GONE.keys(), "chlo_leak reads an op's versions from one of the two"

#: Leaks that a newer jax brought: primitive -> (ops, the jax versions). 0.12 lowers the
#: complex abs through chlo.square on every platform; 0.11.2 and 0.12 a forward cumsum for cuda
#: and rocm through chlo.scan (seen once its crossexec ran apart: the abort had hidden it).
CHLO_NEW: dict[str, tuple[frozenset[str], str]] = {
    "abs": (frozenset({"square"}), ">=0.12"),
    # the tpu svd of complex inputs: chlo.conj (every version) and, through a complex abs, chlo.square
    # (JAX's catalog on 0.12.0.1: 20 census fails "chlo.conj, chlo.square" on tpu)
    "svd": (frozenset({"square"}), ">=0.12"),
    "cumsum": (frozenset({"scan"}), ">=0.11.2"),
}


@dataclass(frozen=True, slots=True)
class KnownIssue:
    """A known upstream failure of these primitives: a record of ``stage`` whose "ErrorType:
    message" matches ``error`` (the whole of it) with this ``status`` is ``expected_fail``."""

    description: str
    url: str
    primitives: frozenset[str]
    stage: str
    error: str
    status: str = "fail"
    #: the jax versions it is known on (a PEP 440 specifier; "": every version measured)
    jax: str = ""
    #: the platforms whose records it explains (a record's own, or those its facts name: the platform
    #: that sank a four-platform export); empty: every platform
    platforms: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        re.compile(self.error)
        check_spec(self.jax)  # a bad specifier fails where the issue is written

    def explains(self, primitive: str, stage: str, status: str, error_type: str | None, error: str | None,
                 platforms: tuple[str, ...] = ()) -> bool:
        return (primitive in self.primitives and stage == self.stage and status == self.status
                and (not self.platforms or bool(set(self.platforms) & set(platforms)))
                and re.fullmatch(self.error, f"{error_type or ''}: {error or ''}") is not None
                and holds_on(self.jax))


def _chlo(primitive: str, ops: frozenset[str], jax: str = "") -> KnownIssue:
    """The census's wording is ``farm.judge.stages.census``'s: every op it names must be known."""
    alt = "|".join(re.escape(o) for o in sorted(ops))
    return KnownIssue(f"{primitive} lowers to {', '.join('chlo.' + o for o in sorted(ops))}, which crosses the plugin "
                      "boundary (JAX #15608)", CHLO_URL, frozenset({primitive}), stage="census",
                      error=rf"CensusViolation: crosses the plugin boundary: chlo\.(?:{alt})(?:, chlo\.(?:{alt}))*",
                      jax=jax)


#: tanh's and logistic's JVP rules compute the derivative from the rounded value (1 - ans**2,
#: ans * (1 - ans)), which loses its digits as the value nears 1 and is 0 once it rounds to 1:
#: JAX's own catalog draws tanh at x = 6.8 in float32 (1% off, seen element by element by
#: ``farm.judge.gradients``); the farm's ``saturating`` harnesses carry it as their own
#: limitations (docs/findings.md, docs/repros/saturated_derivatives.py).
SATURATED_DERIVATIVES = KnownIssue(
    "JAX's tanh and logistic JVP rules (1 - ans**2, ans * (1 - ans)) lose the derivative's digits as the value "
    "nears 1, and give 0 once it rounds to 1 where the true derivative is representable (jax-ml/jax#40388, "
    "#40385, #40342; fix proposed in #40825)", "https://github.com/jax-ml/jax/issues/40385",
    frozenset({"tanh", "logistic"}), stage="vjp", error=r"GradientMismatch: per element: .*")

#: JAX's TPU lowerings of eigh and of svd (QDWH, then eigh) take symbolic batch dimensions only
#: (``--shapes symbolic``; the farm catalog's eigh and svd carry the same as their own
#: limitations): every function built on them whose variant has symbolic matrix dimensions, in
#: every catalog (the api catalog's jnp.linalg and scipy.linalg: eigh, eigvalsh, svd, svdvals, the
#: 2-norm and nuclear norms, cond, lstsq, pinv). The four-platform export it sinks names tpu.
SHAPE_POLY_URL = "https://docs.jax.dev/en/latest/export/shape_poly.html"
TPU_EIGH_SYMBOLIC = KnownIssue(
    "JAX's tpu eigh lowering takes symbolic batch dimensions only ('Shape polymorphism for native lowering for eigh "
    "is implemented only for the batch dimensions')", SHAPE_POLY_URL,
    frozenset({"eigh", "eigvalsh", "svd", "svdvals", "matrix_norm", "norm"}), stage="symbolic_export", status="error",
    error=r"\w+: Shape polymorphism for native lowering for eigh is implemented only for the batch dimensions: .*",
    platforms=("tpu",))
TPU_SVD_SYMBOLIC = KnownIssue(
    "JAX's tpu svd lowering (QDWH) needs concrete matrix dimensions ('Abstract tracer value encountered where "
    "concrete value is expected')", SHAPE_POLY_URL, frozenset({"svd", "cond", "lstsq", "pinv"}),
    stage="symbolic_export", status="error",
    error=r"\w+: Abstract tracer value encountered where concrete value is expected.*", platforms=("tpu",))

#: Every known issue.
KNOWN_ISSUES: tuple[KnownIssue, ...] = (tuple(_chlo(p, ops, ",".join(sorted({CHLO_SINCE.get(o, "") for o in ops} - {""})))
                                              for p, ops in sorted(CHLO_LEAKS.items()))
                                        # a new op beside the primitive's old ones: the census names them together
                                        + tuple(_chlo(p, ops | CHLO_LEAKS.get(p, frozenset()), jax)
                                                for p, (ops, jax) in sorted(CHLO_NEW.items()))
                                        + (SATURATED_DERIVATIVES, TPU_EIGH_SYMBOLIC, TPU_SVD_SYMBOLIC))


#: Every chlo op known to cross the boundary for some primitive.
CHLO_OPS: frozenset[str] = frozenset().union(*CHLO_LEAKS.values(), *(ops for ops, _ in CHLO_NEW.values()))


def explaining(primitive: str, stage: str, status: str, error_type: str | None, error: str | None,
               platforms: tuple[str, ...] = ()) -> KnownIssue | None:
    """The known issue that explains this failure of a harness of ``primitive`` (a record of
    ``platforms``: its own and those its facts name), if any."""
    return next((k for k in KNOWN_ISSUES if k.explains(primitive, stage, status, error_type, error, platforms)), None)


#: (upstream group regex, harness name regex, upstream description regex, why it no longer holds)
STALE_UPSTREAM: tuple[tuple[str, str, str, str], ...] = (
    ("clamp", r"_(complex64|bool)_", r"^upstream: unimplemented$",
     "JAX's catalog lists clamp of complex64 and bool as unimplemented on cpu; on jax 0.10.2 both lower, run and "
     "match the float64 reference (an upstream sweep's unexpected_pass, twice)"),
)


def stale_upstream(group: str, name: str, description: str) -> str | None:
    """Why this upstream limitation no longer holds, or None when it still stands."""
    return next((why for g, n, d, why in STALE_UPSTREAM
                 if re.fullmatch(g, group) and re.search(n, name) and re.search(d, description)), None)


# ------------------------------------------------------------------------- edge values
@dataclass(frozen=True, slots=True)
class EdgeValue:
    """What a primitive does at some edge values of its operands, as data for the edge-values
    check (``farm.pipeline.edges``): ``where`` takes the operands (float64, one shape) and
    gives the elements it covers. A ``convention`` (JAX and SciPy choose differently, both
    defensible) takes those elements out of the variant before it runs: never judged. A
    ``finding`` (JAX wrong, docs/findings.md) is the expected failure: the variant must fail
    with them and pass without them; passing with them is an ``unexpected_pass``."""

    primitive: str
    description: str
    where: Callable[..., Any]
    finding: bool = False
    url: str = ""
    jax: str = ""  # the jax versions it holds on (PEP 440; "": every version measured)
    dtypes: tuple[str, ...] = ()  # the harness dtypes it holds for (empty: all)

    def __post_init__(self) -> None:
        check_spec(self.jax)


#: Measured by ``farm sweep --edges`` on jax 0.12.0.1 (docs/edges.md).
EDGE_VALUES: tuple[EdgeValue, ...] = (
    EdgeValue("lgamma", "log|Γ(-inf)|: JAX gives +inf (C99's lgamma), SciPy's gammaln -inf",
              lambda x: x == -float("inf")),
    EdgeValue("digamma", "the pole at zero approached from -0 (and a negative subnormal, flushed to -0 by the CPU): "
              "JAX gives -inf (its +0 value), SciPy +inf (the limit from below)",
              lambda x: (x == 0) | (abs(x) < 1.1754943508222875e-38)),
    EdgeValue("polygamma", "ψ⁽ᵐ⁾ at its poles, x a non-positive integer (-0 and flushed negative subnormals "
              "included): JAX gives ±inf, SciPy NaN or the other infinity",
              lambda m, x: (x == 0) | (abs(x) < 1.1754943508222875e-38) | ((x < 0) & (x == np.floor(x)))),
    EdgeValue("select_n", "a selector out of range [0, number of cases): undefined (lax.select_n's documentation)",
              lambda which, *cases: (which < 0) | (which >= len(cases))),
    EdgeValue("bessel_i1e", "i1e(-0): JAX gives -0 (i1e is odd), SciPy +0", lambda x: x == 0),
    EdgeValue("igamma", "P(a, x) at a = ±0 or a subnormal a (flushed to ±0 by the CPU): outside a > 0, where JAX "
              "gives NaN or the limit 1 and SciPy the other", lambda a, x: (a <= 0) | (abs(a) < 1.1754943508222875e-38)),
    EdgeValue("igammac", "Q(a, x) at a = ±0 or a subnormal a: outside a > 0 (as igamma)",
              lambda a, x: (a <= 0) | (abs(a) < 1.1754943508222875e-38)),
    EdgeValue("zeta", "Hurwitz ζ(s, q) for q <= 0 or a subnormal q, or s <= 1: outside the domain JAX implements "
              "(s > 1, q > 0: NaN), where SciPy gives inf or a value",
              lambda s, q: (q <= 0) | (abs(q) < 1.1754943508222875e-38) | (s <= 1)),
    EdgeValue("regularized_incomplete_beta", "I_x(a, b) with a or b <= 0 or subnormal (flushed to 0 by the CPU), or "
              "x outside [0, 1]: outside the domain, JAX NaN or a limit, SciPy the other",
              lambda a, b, x: ((a <= 0) | (b <= 0) | (abs(a) < 1.1754943508222875e-38)
                               | (abs(b) < 1.1754943508222875e-38) | (x < 0) | (x > 1))),
    EdgeValue("polygamma", "ψ⁽ᵐ⁾(+inf) for an integer m >= 1 is NaN; it is 0. jax-ml/jax#38608 "
              "(docs/repros/polygamma_at_infinity.py)",
              lambda m, x: (m >= 1) & (m < 1e6) & (m == np.floor(m)) & (x == float("inf")), finding=True,
              url="https://github.com/jax-ml/jax/issues/38608"),
    EdgeValue("polygamma", "float32 ψ⁽ᵐ⁾ of a large order overflows in its intermediates: ψ⁽⁴⁰⁾(2.84) is -inf where "
              "-2.1e29 is a normal float32, ψ⁽¹⁰⁰⁾(2.84) NaN where the value is past float32's range (-inf); float64 is "
              "right. No upstream report found (docs/repros/polygamma_large_order.py)",
              lambda m, x: (m >= 40) & (m <= 1000) & (m == np.floor(m)) & (x > 0.5) & (x < 10), finding=True,
              dtypes=("float32", "bfloat16", "float16")),
    EdgeValue("zeta", "ζ(s, +inf) for s > 1 is NaN; it is 0. jax-ml/jax#38637, fix proposed in #38647 "
              "(docs/repros/zeta_at_infinity.py)",
              lambda s, q: (s > 1) & (s < float("inf")) & (q == float("inf")), finding=True,
              url="https://github.com/jax-ml/jax/issues/38637"),
    EdgeValue("regularized_incomplete_beta", "I_x(a, b) at an extreme finite parameter: NaN for a huge a (3.4e38: 0 for "
              "x < 1; JAX gives 0 at a = inf) or b (3.4e38: 1), and -1.2e-7, outside [0, 1], for b = 1.2e-38 (1.6e-38); "
              "no upstream report found (docs/repros/betainc_huge_parameter.py)",
              lambda a, b, x: ((x > 0) & (x < 1) & (((a > 1e30) & (a < float("inf")) & (b > 1e-30) & (b < 1e30))
                                                    | ((b > 1e30) & (b < float("inf")) & (a > 1e-30) & (a < 1e30))
                                                    | ((b > 0) & (b < 1e-30) & (a > 1e-30) & (a < 1e30)))),
              finding=True),
    EdgeValue("igamma", "P(a, x) for the largest finite a (3.4e38) is NaN (it is 0; JAX gives 0 at a = 1e30); "
              "no upstream report found (docs/repros/igamma_extremes.py)",
              lambda a, x: (a > 3e38) & (a < float("inf")) & (x > 0) & (x < 1e30), finding=True,
              dtypes=("float32", "bfloat16")),
    EdgeValue("igammac", "Q(a, x) for the largest finite a (3.4e38) is NaN (it is 1), and for a tiny a it is 1.0 "
              "(a = 1.2e-38: 4.9e-39) or 2.7e-6 (a = 1e-30: 4.1e-31); no upstream report found "
              "(docs/repros/igamma_extremes.py)",
              lambda a, x: (x > 0) & (x < 1e30) & (((a > 3e38) & (a < float("inf"))) | ((a > 0) & (a < 1e-20))),
              finding=True, dtypes=("float32", "bfloat16")),
    EdgeValue("zeta", "ζ(s, q) for a huge s (1e4 and up, q > 1) is NaN where it is 0, near the pole (s = 1 + 1e-6) it is "
              "5% off, and ζ(inf, q < 1) is NaN where it is inf (jax-ml/jax#38271 reports ζ(inf, 0)) "
              "(docs/repros/zeta_extremes.py)",
              lambda s, q: (((s >= 1e4) & (s < float("inf")) & (q > 1) & (q < float("inf")))
                            | ((s > 1) & (s < 1 + 1e-5) & (q > 0) & (q < float("inf")))
                            | ((s == float("inf")) & (q > 0) & (q < 1))), finding=True,
              url="https://github.com/jax-ml/jax/issues/38271"),
    EdgeValue("cbrt", "cbrt of a float32 or bfloat16 subnormal is -5.6e-16 whatever the subnormal (wrong sign and "
              "magnitude; flushing would give 0). jax-ml/jax#37761 (closed; still so in 0.12.0.1) "
              "(docs/repros/cbrt_subnormal.py)",
              lambda x: (x != 0) & (abs(x) < 1.1754943508222875e-38), finding=True,
              url="https://github.com/jax-ml/jax/issues/37761", dtypes=("float32", "bfloat16")),
    EdgeValue("atan2", "XLA CPU atan2 with a subnormal argument: NaN (float32, bfloat16) or the wrong quadrant "
              "(float64) (docs/findings.md; ATAN2_SUBNORMAL on the farm's special-value harnesses)",
              lambda y, x: (((y != 0) & (abs(y) < 1.1754943508222875e-38))
                            | ((x != 0) & (abs(x) < 1.1754943508222875e-38))), finding=True),
    EdgeValue("while", "a loop whose carry starts at a constant 0 and adds the input (0 * 0.5 + x): XLA folds the "
              "constant zero away (0 + x to x), keeping -0 where IEEE addition gives +0",
              lambda x: x == 0),
)


_TINY = 1.1754943508222875e-38  # float32's smallest normal: below it, XLA:CPU flushes to ±0
_INF = float("inf")


def _pole(x: Any) -> Any:
    """x a non-positive integer, -0, or a subnormal (flushed to ±0 by the CPU)."""
    return (np.abs(x) <= _TINY) | ((x < 0) & (x == np.floor(x)))


def _huge(x: Any) -> Any:
    """|x| infinite or beyond 1e30."""
    return np.abs(x) > 1e30


#: "NaN where an argument is infinite, huge or a pole and the answer is a limit": their one repro
#: (measured on jax 0.10.2, 0.12.0 and 0.12.0.1, 2026-12-02).
_INF_ARGS = "(docs/repros/special_function_limits.py)"

#: What the api catalog's scipy.special functions do at edge values against SciPy (``compare="edges"``,
#: ``farm.judge.edges.twin_at_edges``), keyed ``"label.name"``: triaged from the first sweep judged
#: against the twin (jax 0.12.0.1, 2026-12-02; docs/api.md "Edge values"). What a function shares with
#: its lax primitive is that primitive's (``API_EDGE_ALIASES``).
API_EDGE_VALUES: tuple[EdgeValue, ...] = (
    EdgeValue("jnp.modf", "modf(±inf)'s fractional part: JAX gives NaN (x - trunc(x) is inf - inf), NumPy and C99 "
              "±0.0; the integral part agrees (docs/repros/modf_inf.py, found 2026-12-03 on 0.9.2 and 0.12.0.1)",
              lambda x: np.isinf(x), finding=True),
    EdgeValue("jnp.floor_divide", "an integer x // 0: JAX gives -2 (x != 0) and -1 (0 // 0), XLA's x / 0 = -1 with "
              "the floor correction applied; NumPy 0 (with a warning), as jnp.remainder(x, 0) is; a fix (jax e575f73) "
              "was reverted the same day (fcdbb28); jax-ml/jax#11990 (open)", lambda x, y: y == 0, finding=True, dtypes=("int32",),
              url="https://github.com/jax-ml/jax/issues/11990"),
    EdgeValue("jnp.exp2", "exp2 in bfloat16 is exp(bf16(ln 2) * x): ln 2 rounded to 0.6914, so the exponent errs by "
              "0.25% of x: exp2(100) = 9.26e29, not 2^100 (docs/accuracy.md: exp2 bfloat16 101 ULP, every version)",
              lambda x: np.isfinite(x) & (np.abs(x) >= 16), finding=True, dtypes=("bfloat16",)),
    EdgeValue("jnp.power", "pow with a bfloat16 subnormal base: neither the IEEE value nor a flushed zero's "
              "((9.2e-41)^(1/128) = 0.443, IEEE 0.487; docs/accuracy.md: pow with subnormal arguments)",
              lambda x, y: (x != 0) & (np.abs(x) < _TINY), finding=True, dtypes=("bfloat16",)),
    EdgeValue("jnp.sinc", "sinc(±inf): JAX gives 0 (the limit), NumPy NaN (sin(π·inf) / (π·inf))", lambda x: np.isinf(x)),
    EdgeValue("scipy.special.beta", "B(a, b) at an infinite, non-positive (-0, a negative integer, -inf) or subnormal "
              "argument, or both the largest finite value: NaN or the wrong sign where SciPy gives 0, ±inf or the "
              "poles' cancelled value (B(-1, 1) = -1); jax-ml/jax#38270 (open) " + _INF_ARGS,
              lambda a, b: (a <= 0) | (b <= 0) | (np.abs(a) <= _TINY) | (np.abs(b) <= _TINY) | np.isinf(a)
              | np.isinf(b) | ((a > 1e37) & (b > 1e37)), finding=True, url="https://github.com/jax-ml/jax/issues/38270"),
    EdgeValue("scipy.special.betaln", "log|B(a, b)| at an infinite argument is NaN where it is -inf "
              "(jax-ml/jax#39106, open), NaN at non-positive or subnormal ones where SciPy gives a value or inf "
              "(jax-ml/jax#38243, open), and 1% off at the largest finite a (-114.15 for -115.45 at a = 3.4e38, b = 1.3; "
              "right at 1e36) " + _INF_ARGS,
              lambda a, b: (a <= 0) | (b <= 0) | (np.abs(a) <= _TINY) | (np.abs(b) <= _TINY) | (a > 1e37) | (b > 1e37),
              finding=True, url="https://github.com/jax-ml/jax/issues/39106"),
    EdgeValue("scipy.special.loggamma", "loggamma at x <= 0 (or subnormal, flushed to ±0): JAX's real loggamma is "
              "NaN outside x > 0, SciPy's inf at the pole 0", lambda x: (x <= 0) | (np.abs(x) <= _TINY)),
    EdgeValue("scipy.special.poch", "poch(z, m) at z <= 0 or subnormal (Γ(z)'s poles), or z + m at a pole of "
              "Γ(z + m): JAX NaN, SciPy the limit or inf", lambda z, m: (z <= 0) | (np.abs(z) <= _TINY) | _pole(z + m)),
    EdgeValue("scipy.special.poch", "poch(z, m) is NaN for float32 z >= ~35 (gamma(z + m) / gamma(z) overflows: inf "
              "/ inf; docs/repros/poch_large_z_nan.py) and at z = inf " + _INF_ARGS,
              lambda z, m: (z >= 30) & ~np.isnan(m), finding=True, dtypes=("float32",)),
    EdgeValue("scipy.special.owens_t", "T(h, ±inf) is NaN for |h| <= 1.2e-38 where it is ±1/4 (right at h = 0.5) "
              + _INF_ARGS, lambda h, a: np.isinf(a) & (np.abs(h) <= _TINY), finding=True),
    EdgeValue("scipy.special.comb", "comb(N, k) in float32 loses N's digits to the cancellation in "
              "lgamma(N + 1) - lgamma(N - k + 1): 4.5e-4 off at N = 1e3, k = 1, 14% at 1e5, k = 3, 56% at 1e6, 1 "
              "for 1e10; NaN at the largest finite N and at inf (docs/repros/comb_large_n.py; no upstream report "
              "found)", lambda n, k: ((n > 500) & (k != 0) | (n > 1e37)) & ~np.isnan(k),
              finding=True, dtypes=("float32",)),
    EdgeValue("scipy.special.boxcox", "boxcox(x, λ) for λ = ±1.2e-38 (the smallest normal) is 0 or ±8.5e37 where it "
              "is log(x): λ·log(x) is subnormal and XLA:CPU flushes it (right at λ = 1e-30); and boxcox(3.4e38, 1) "
              "is inf where it is 3.4e38 (docs/repros/boxcox_tiny_lambda.py)",
              lambda x, lm: ((np.abs(lm) > 0) & (np.abs(lm) < 1e-37)) | ((x > 1e38) & (lm > 0.5)), finding=True,
              dtypes=("float32",)),
    EdgeValue("scipy.special.boxcox1p", "boxcox1p(x, λ) for λ = ±1.2e-38 is 0 or ±8.5e37 where it is log1p(x) (as "
              "boxcox), and boxcox1p(3.4e38, 1) is inf (docs/repros/boxcox_tiny_lambda.py)",
              lambda x, lm: ((np.abs(lm) > 0) & (np.abs(lm) < 1e-37)) | ((x > 1e38) & (lm > 0.5)), finding=True,
              dtypes=("float32",)),
    EdgeValue("scipy.special.gammainc", "P(a, x) for a = 1.2e-38 (the smallest normal) is 0 where it is 1 (right "
              "at a = 1e-30), and P(3.4e38, 3.4e38) is NaN where it is 1/2 (docs/repros/igamma_extremes.py)",
              lambda a, x: ((a > 0) & (a < 1e-37)) | ((a > 3e38) & (a < _INF) & (x > 0)), finding=True,
              dtypes=("float32",)),
    EdgeValue("scipy.special.gammaincc", "Q(3.4e38, 3.4e38) is NaN where it is 1/2 (as igammac at the largest "
              "finite a, docs/repros/igamma_extremes.py)",
              lambda a, x: (a > 3e38) & (a < _INF) & (x > 0), finding=True, dtypes=("float32",)),
    EdgeValue("scipy.special.zeta", "ζ(s, q) at a huge or infinite s is NaN for every q > 0 (1 at q = 1, inf for q "
              "< 1, 0 for q > 1; jax-ml/jax#38271 reports ζ(inf, 0); docs/repros/zeta_extremes.py)",
              lambda s, q: (s >= 1e4) & (q > 0), finding=True, url="https://github.com/jax-ml/jax/issues/38271"),
    EdgeValue("scipy.special.polygamma", "ψ⁽ᵐ⁾ of a huge order (m = 2^30, 2^31 - 1) is NaN where it overflows to "
              "±inf (as the large-order finding: docs/repros/polygamma_large_order.py)",
              lambda m, x: (m > 1000) & np.isfinite(x), finding=True, dtypes=("float32",)),
    EdgeValue("scipy.special.hyp1f1", "1F1(a, b, x) with |a|, |b| or |x| beyond 1e30 or infinite: SciPy gives NaN or "
              "inf where JAX gives a limit (1F1 -> 1 as |b| -> inf, e^x for a = b), or inf where the series diverges",
              lambda a, b, x: _huge(a) | _huge(b) | _huge(x)),
    EdgeValue("scipy.special.hyp1f1", "1F1(a, b, x) at b a non-positive integer (a pole; -0 and subnormals "
              "included): JAX -inf, 1 or e^x, SciPy inf or 0", lambda a, b, x: _pole(b)),
    EdgeValue("scipy.special.hyp1f1", "1F1(a, b, x) is 1 for a NaN a or b (docs/repros/hyp1f1_negative_x.py)",
              lambda a, b, x: np.isnan(a) | np.isnan(b), finding=True),
    EdgeValue("scipy.special.hyp2f1", "2F1(a, b, c, z) is 1 for a NaN z (docs/repros/hyp2f1_nan_z.py)",
              lambda a, b, c, z: np.isnan(z), finding=True),
    EdgeValue("nn.squareplus", "jax.nn.squareplus evaluates (x + sqrt(x**2 + b)) / 2 as written: x**2 overflows for "
              "|x| > sqrt(max), inf where the function is ~x or ~0 (docs/repros/squareplus_overflow.py)",
              lambda x: np.isfinite(x) & (np.abs(x) > 1.8e19), finding=True, dtypes=("float32", "bfloat16")),
    EdgeValue("scipy.stats.cauchy.logcdf", "cauchy.logcdf(x) for x -> -inf: log(1/2 + atan(x)/pi) cancels, -18.89 "
              "under jit at x = -3.4e38 (-89.87) and at -inf (docs/repros/stats_tails.py)",
              lambda x: x < -1e30, finding=True, dtypes=("float32",)),
    EdgeValue("scipy.stats.cauchy.logsf", "cauchy.logsf(x) for x -> inf: -18.89 under jit at 3.4e38 (-89.87) and at "
              "inf (docs/repros/stats_tails.py)", lambda x: x > 1e30, finding=True, dtypes=("float32",)),
    EdgeValue("scipy.stats.cauchy.logpdf", "cauchy.logpdf(±3.4e38) is -inf where it is -178.59: x² overflows "
              "(docs/repros/stats_tails.py)", lambda x: np.isfinite(x) & (np.abs(x) > 1e19), finding=True,
              dtypes=("float32",)),
    EdgeValue("scipy.stats.gumbel_r.logsf", "gumbel_r.logsf(x) for large x is -inf where it is about -x "
              "(exp(-exp(-x)) rounds to 1; -100 at x = 100: docs/repros/stats_tails.py)",
              lambda x: np.isfinite(x) & (x > 15), finding=True, dtypes=("float32",)),
    EdgeValue("scipy.stats.gumbel_l.ppf", "gumbel_l.ppf at q = 0 and 1 (and a subnormal q, flushed to 0) is NaN where "
              "it is -inf and inf (jax-ml/jax#38318, open; docs/repros/stats_tails.py)",
              lambda q: (np.abs(q) <= _TINY) | (q == 1), finding=True,
              url="https://github.com/jax-ml/jax/issues/38318"),
    EdgeValue("scipy.stats.gumbel_r.ppf", "gumbel_r.ppf at q = 0 and 1 (and a subnormal q) is NaN where it is -inf "
              "and inf (jax-ml/jax#38318, open; docs/repros/stats_tails.py)",
              lambda q: (np.abs(q) <= _TINY) | (q == 1), finding=True,
              url="https://github.com/jax-ml/jax/issues/38318"),
    # laplace.logpdf(±3.4e38): SciPy takes the log of the underflowed pdf (-inf), JAX's -log 2 - |x| is right:
    # no convention since 2026-12-03, mpmath's value decides there (farm.reference.exact)
    EdgeValue("scipy.special.expi", "Ei(x) is NaN at x = inf and the largest finite x where it is inf "
              "(docs/repros/expi_spence_extremes.py)", lambda x: x > 1e38, finding=True),
    EdgeValue("scipy.special.spence", "spence(x) is NaN at the largest finite x where it is -3937.5 "
              "(docs/repros/expi_spence_extremes.py)", lambda x: (x > 1e38) & (x < _INF), finding=True),
)


#: The scipy.stats distributions with shape parameters at edge values (triaged 2026-12-03, jax
#: 0.12.0.1: 3,727 differing elements of 213 variants, every one in a class below; docs/api.md).
#: The operands a ``where`` gets are the harness's: x (k, q) and the shape parameters, with
#: binom's and betabinom's n fixed at 9 (``harnesses/api_stats.py``'s calls).
_STATS_FIXED = {"binom": (9,), "betabinom": (9,)}
_STATS_REPRO = "(docs/repros/stats_parameters.py)"


def _flushed(v: Any) -> Any:
    """``v`` with its subnormals flushed to ±0 (as XLA:CPU reads them)."""
    return np.where(np.abs(v) < _TINY, 0.0 * v, v)


def _outside(dist: str) -> Callable[..., Any]:
    """Where a shape parameter is outside ``dist``'s domain by SciPy's own check
    (``rv_generic._argcheck``), as given or as a flushing device reads it."""
    def where(x: Any, *params: Any) -> Any:
        import scipy.stats
        check = getattr(scipy.stats, dist)._argcheck
        fixed = _STATS_FIXED.get(dist, ())
        with np.errstate(all="ignore"):
            ok = np.asarray(check(*fixed, *params)) & np.asarray(check(*fixed, *(_flushed(p) for p in params)))
        return ~np.broadcast_to(ok, np.broadcast(x, *params).shape)
    return where


def _underflows(dist: str, fn: str) -> Callable[..., Any]:
    """Where the probability whose log ``fn`` gives (SciPy's, float64) is below float32's
    smallest normal: its log is representable, the float32 probability is not."""
    def where(x: Any, *params: Any) -> Any:
        import scipy.stats
        base = getattr(getattr(scipy.stats, dist), fn.removeprefix("log"))
        with np.errstate(all="ignore"):
            p = np.asarray(base(x, *_STATS_FIXED.get(dist, ()), *params))
        return (p > 0) & (p < _TINY)
    return where


def _pareto_small_cdf(x: Any, b: Any) -> Any:
    with np.errstate(all="ignore"):
        cdf = 1 - np.power(x, -b)
    return (cdf > 0) & (cdf < 1e-3)


def _stats(description: str, by_dist: Mapping[str, str], where: Callable[[str, str], Callable[..., Any]],
           finding: bool = True) -> tuple[EdgeValue, ...]:
    """One entry per distribution and function (``by_dist``: distribution -> its functions)."""
    return tuple(EdgeValue(f"scipy.stats.{d}.{fn}", description, where(d, fn), finding=finding,
                           dtypes=("float32",) if finding else ())
                 for d, fns in by_dist.items() for fn in fns.split())


def _any_operand(test: Callable[[Any], Any]) -> Callable[[str, str], Callable[..., Any]]:
    def where(*ops: Any) -> Any:
        with np.errstate(all="ignore"):
            return np.logical_or.reduce([np.asarray(test(o)) for o in np.broadcast_arrays(*ops)])
    return lambda d, fn: where


_DISCRETE_PMF = "pmf logpmf"
_LOGS = "logcdf logsf"
_ALL_SIX = "cdf sf logcdf logsf pdf logpdf"
STATS_EDGE_VALUES: tuple[EdgeValue, ...] = (
    *_stats("a shape parameter outside the distribution's domain (SciPy's own check; as given or flushed): SciPy "
            "gives NaN, jax.scipy.stats does not check its parameters (most of its functions evaluate their formula, "
            "beta's return NaN): no answer is specified",
            {d: "pdf logpdf pmf logpmf cdf sf logcdf logsf ppf isf" for d in (
                "bernoulli", "beta", "betabinom", "binom", "chi2", "gamma", "gennorm", "geom", "nbinom", "pareto",
                "poisson", "t", "vonmises", "wrapcauchy")},
            lambda d, fn: _outside(d), finding=False),
    EdgeValue("scipy.stats.bernoulli.ppf", "bernoulli.ppf at q = 0 (±0, a flushed subnormal): SciPy gives -1 (its "
              "discrete ppf(0) is the support's lower bound - 1), JAX 0; and ppf(1) for p = 0: SciPy 1 (the support's "
              "upper bound), JAX 0 (the smallest k with cdf(k) >= 1)",
              lambda q, p: (np.abs(q) <= _TINY) | ((q == 1) & (np.abs(p) <= _TINY))),
    *_stats("a pmf at a non-integer k is 0 (poisson's says so); JAX evaluates the formula: geom.pmf(0.5, 1) = inf, "
            "binom.logpmf(0.5, 9, 0.6) = -6.81 " + _STATS_REPRO,
            dict.fromkeys(("bernoulli", "betabinom", "binom", "geom", "nbinom"), _DISCRETE_PMF),
            lambda d, fn: lambda k, *p: np.isfinite(k) & (k != np.floor(k))),
    *_stats("a NaN x gives 0 or -inf (the support check reads NaN as outside it), not NaN " + _STATS_REPRO,
            {"binom": _DISCRETE_PMF, "poisson": _DISCRETE_PMF, "gamma": "pdf logpdf", "wrapcauchy": "pdf logpdf"},
            lambda d, fn: lambda x, *p: np.isnan(x)),
    *_stats("the log of a probability below float32's smallest normal is -inf though the log is representable "
            "(chi2.logcdf(2.62, 100) = -136.26) " + _STATS_REPRO,
            {"beta": _LOGS, "betabinom": "logpmf", "chi2": "logcdf logsf logpdf", "gamma": _LOGS, "geom": "logpmf",
             "nbinom": "logpmf", "pareto": "logpdf", "t": "logpdf"}, _underflows),
    *_stats("Q(a, x) for a small a (below ~1e-5) is computed as 1 - P(a, x), which cancels: gamma.sf(0.5, 1.2e-7) "
            "= -3.6e-7 (6.7e-8), chi2.sf(1.2e-7, 1.2e-7) twice its value, the logs NaN " + _STATS_REPRO,
            {"gamma": "cdf sf logcdf logsf", "chi2": "cdf sf logcdf logsf"},
            lambda d, fn: (lambda x, a: (a > 0) & (a < 1e-5)) if d == "gamma" else (lambda x, k: (k > 0) & (k < 2e-5))),
    EdgeValue("scipy.stats.pareto.logcdf", "pareto.logcdf where the cdf is small (x near 1, or a tiny b) cancels in "
              "1 - x^-b: 9% off at x = 1 + 2^-23 " + _STATS_REPRO, _pareto_small_cdf, finding=True,
              dtypes=("float32",)),
    *_stats("at an infinite or huge operand (|v| > 1e30): NaN, ±inf or a wrong value where the answer is a limit or "
            "representable (t.pdf(x, inf) is norm.pdf(x): NaN; gamma.cdf(3.67, 3.4e38) = 0: NaN; "
            "vonmises.logpdf(1.2e-7, 3.4e38) = -2.4e24: 43.4) " + _STATS_REPRO,
            {"beta": "cdf sf logcdf logsf", "betabinom": "logpmf", "chi2": _ALL_SIX, "gamma": _ALL_SIX,
             "gennorm": "cdf pdf logpdf", "geom": "logpmf", "nbinom": _DISCRETE_PMF, "pareto": "sf logcdf logsf pdf "
             "logpdf ppf", "poisson": "cdf pmf logpmf", "t": "pdf logpdf", "vonmises": "pdf logpdf"},
            _any_operand(lambda v: np.abs(v) > 1e30)),
    *_stats("at a tiny nonzero operand (|v| < 1e-30: a subnormal or float32's smallest normal, whose intermediates "
            "XLA:CPU flushes): -inf, NaN or 0 where the answer is representable (chi2.logcdf(1.2e-38, 1) = -43.89: "
            "-inf; t.logpdf(0, 1.2e-38) = -44.36: -inf) " + _STATS_REPRO,
            {"bernoulli": _DISCRETE_PMF, "beta": _LOGS, "betabinom": _DISCRETE_PMF, "binom": _DISCRETE_PMF,
             "chi2": _ALL_SIX, "gamma": _ALL_SIX, "gennorm": "cdf pdf logpdf", "geom": _DISCRETE_PMF,
             "nbinom": _DISCRETE_PMF, "pareto": "logpdf ppf", "poisson": _DISCRETE_PMF, "t": "pdf logpdf",
             "wrapcauchy": "pdf logpdf"},
            _any_operand(lambda v: (v != 0) & (np.abs(v) < 1e-30))),
)


# ---- matrix functions at edge matrices (``farm.catalog.api._edge_matrices``) -------------------
# A ``where`` here takes one matrix of the batch (float64) and says whether the entry covers that
# matrix's answer (every element of it); the judge asks it matrix by matrix.

_F32_MAX = float(np.finfo(np.float32).max)


def _m_a00_max(m: np.ndarray) -> bool:
    """The matrix holding ±float32's largest value at [0, 0]."""
    return bool(np.abs(m.flat[0]) >= _F32_MAX)


def _m_tiny(m: np.ndarray) -> bool:
    """The matrix scaled by 2**-66 (``STRUCTURAL``'s tiny): every entry below 2**-60, not all zero."""
    a = np.abs(m)
    return bool(np.all(np.isfinite(a)) and 0 < a.max() <= 2.0 ** -60)


def _m_huge(m: np.ndarray) -> bool:
    """The matrix scaled by 2**66 (``STRUCTURAL``'s huge): finite, its largest entry past 2**60."""
    a = np.abs(m)
    return bool(np.all(np.isfinite(a)) and 2.0 ** 60 <= a.max() < _F32_MAX)


def singular_matrix(m: np.ndarray) -> bool:
    """The matrix with two equal rows (``STRUCTURAL``'s singular), or all zeros."""
    return bool(m.ndim == 2 and m.shape[0] > 1 and np.array_equal(m[0], m[1]))


_SYMMETRIZE = ("symmetrize_input computes (A + A^H) / 2, which overflows where an entry is above half the "
               "largest float32 (jax._src.lax.linalg.symmetrize): NaN or inf where the answer is finite "
               "(docs/repros/linalg_edges.py)")
_GEEV_SCALING = ("eigenvalues of a matrix whose largest entry is above about 2**40 or below 2**-40 come out "
                 "scaled to that bound on CPU: the LAPACK SciPy 1.17.1 ships (jaxlib's CPU kernels call SciPy's) "
                 "does not undo sgeev's scaling on the eigenvalues; SciPy 1.18.1's does (docs/repros/linalg_edges.py)")
_FTZ = ("XLA:CPU flushes subnormal intermediates to zero (FTZ, by design): the squares or products of a "
        "matrix scaled by 2**-66 are below float32's smallest normal")
MATRIX_EDGE_VALUES: tuple[EdgeValue, ...] = (
    *(EdgeValue(k, _GEEV_SCALING, lambda m: _m_a00_max(m) or _m_tiny(m) or bool(np.max(np.abs(m)) >= 2.0 ** 60),
                finding=True) for k in ("jnp.linalg.eig", "jnp.linalg.eigvals")),
    *(EdgeValue(k, _SYMMETRIZE, _m_a00_max, finding=True) for k in (
        "jnp.linalg.cholesky", "jnp.linalg.eigh", "jnp.linalg.eigvalsh", "scipy.linalg.eigh")),
    *(EdgeValue(k, "no scaling against overflow: the squares of entries past 2**64 overflow to inf, as NumPy's own "
                "float32 norm does (sqrt(dot(x, x)))", lambda m: _m_a00_max(m) or _m_huge(m))
      for k in ("jnp.linalg.norm", "jnp.linalg.matrix_norm", "jnp.linalg.vector_norm")),
    EdgeValue("scipy.linalg.funm", "sin of a matrix with entries past 2**60 has no float32 answer (the argument's "
              "spacing is past 2*pi)", lambda m: _m_a00_max(m) or _m_huge(m)),
    EdgeValue("scipy.linalg.expm", "exp of a matrix holding -float32's largest value is NaN where the answer is "
              "finite (scaling and squaring: docs/repros/linalg_edges.py)",
              lambda m: bool(m.flat[0] <= -_F32_MAX), finding=True),
    *(EdgeValue(k, "Householder QR of a matrix holding float32's largest value: inf and NaN in R "
              "where LAPACK's sgeqrf (NumPy in float32) is finite (docs/repros/linalg_edges.py)", _m_a00_max,
                finding=True) for k in ("jnp.linalg.qr", "scipy.linalg.qr")),
    EdgeValue("jnp.linalg.matrix_rank", "its tolerance S.max() * max(M, N) * eps overflows to inf for a matrix "
              "holding float32's largest value: rank 0 where NumPy in float32 gives 1 (docs/repros/linalg_edges.py)",
              _m_a00_max, finding=True),
    EdgeValue("scipy.linalg.polar", "the polar factors of a matrix holding float32's largest value are all zero "
              "(its QDWH iteration's scaling overflows; docs/repros/linalg_edges.py)", _m_a00_max, finding=True),
    EdgeValue("scipy.linalg.polar", "the unitary polar factor of a singular matrix is not unique (SciPy's, from "
              "the SVD, is one choice; JAX's QDWH gives another)", singular_matrix),
    EdgeValue("jnp.linalg.cond", "the condition number of a singular or numerically singular matrix (its "
              "smallest singular value below float32's resolution of the largest) has no float32 answer but "
              "'huge': JAX's and the float64 twin's differ", lambda m: singular_matrix(m) or _m_a00_max(m)),
    EdgeValue("scipy.linalg.expm", "exp of a matrix holding 100: scaling and squaring in float32 loses about "
              "||A|| * eps relative (2**7 squarings), 1% near float32's overflow: no float32 answer closer",
              lambda m: bool(np.all(np.isfinite(m)) and 100 <= np.max(np.abs(m)) < 2.0 ** 60)),
    EdgeValue("scipy.linalg.sqrtm", "a matrix with a negative eigenvalue has no principal square root, and a "
              "singular one's is infinitely ill-conditioned: JAX's (complex, from the Schur form) and SciPy's "
              "are different square roots", lambda m: bool(np.all(np.isfinite(m)) and (
                  singular_matrix(m) or np.linalg.eigvalsh(m).min() <= 0))),
    *(EdgeValue(k, _FTZ, _m_tiny) for k in ("jnp.linalg.norm", "jnp.linalg.matrix_norm", "jnp.linalg.vector_norm",
                                          "scipy.linalg.funm")),
)


#: api functions that are one lax primitive (same operands, same order): what is known of the
#: primitive at edge values holds for them (``api_edge_values``).
API_EDGE_ALIASES = {
    "scipy.special.digamma": "digamma", "scipy.special.gammaln": "lgamma", "scipy.special.gammainc": "igamma",
    "scipy.special.gammaincc": "igammac", "scipy.special.zeta": "zeta", "scipy.special.polygamma": "polygamma",
    "scipy.special.betainc": "regularized_incomplete_beta", "scipy.special.i1e": "bessel_i1e",
    "jnp.arctan2": "atan2", "jnp.atan2": "atan2", "jnp.cbrt": "cbrt",
}


def api_edge_values(label: str, name: str, dtype: str) -> tuple[EdgeValue, ...]:
    """What is known of api function ``label.name`` at edge values (its own entries, keyed
    ``"label.name"``, and its lax primitive's where it is one: ``API_EDGE_ALIASES``)."""
    key = f"{label}.{name}"
    alias = API_EDGE_ALIASES.get(key)
    return edge_values(key, dtype) + (edge_values(alias, dtype) if alias else ())


def edge_values(primitive: str, dtype: str) -> tuple[EdgeValue, ...]:
    """What is known of ``primitive`` at edge values, for a harness of ``dtype`` (on the running jax)."""
    return tuple(e for e in EDGE_VALUES + API_EDGE_VALUES + STATS_EDGE_VALUES + MATRIX_EDGE_VALUES
                 if e.primitive == primitive and (not e.dtypes or dtype in e.dtypes)
                 and holds_on(e.jax))
