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

import re
from dataclasses import dataclass

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

    def __post_init__(self) -> None:
        re.compile(self.error)

    def explains(self, primitive: str, stage: str, status: str, error_type: str | None, error: str | None) -> bool:
        return (primitive in self.primitives and stage == self.stage and status == self.status
                and re.fullmatch(self.error, f"{error_type or ''}: {error or ''}") is not None)


def _chlo(primitive: str, ops: frozenset[str]) -> KnownIssue:
    """The census's wording is ``farm.judge.stages.census``'s: every op it names must be known."""
    alt = "|".join(re.escape(o) for o in sorted(ops))
    return KnownIssue(f"{primitive} lowers to {', '.join('chlo.' + o for o in sorted(ops))}, which crosses the plugin "
                      "boundary (JAX #15608)", CHLO_URL, frozenset({primitive}), stage="census",
                      error=rf"CensusViolation: crosses the plugin boundary: chlo\.(?:{alt})(?:, chlo\.(?:{alt}))*")


#: Every known issue.
KNOWN_ISSUES: tuple[KnownIssue, ...] = tuple(_chlo(p, ops) for p, ops in sorted(CHLO_LEAKS.items()))


#: Every chlo op known to cross the boundary for some primitive.
CHLO_OPS: frozenset[str] = frozenset().union(*CHLO_LEAKS.values())


def explaining(primitive: str, stage: str, status: str, error_type: str | None, error: str | None) -> KnownIssue | None:
    """The known issue that explains this failure of a harness of ``primitive``, if any."""
    return next((k for k in KNOWN_ISSUES if k.explains(primitive, stage, status, error_type, error)), None)


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
