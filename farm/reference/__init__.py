"""An independent numeric reference for any harness: its jaxpr evaluated in NumPy float64.

``evaluate(closed_jaxpr, *args)`` runs a closed jaxpr equation by equation with one
NumPy/SciPy rule per primitive (``farm.reference.evaluator.RULES``), recursing into
sub-jaxprs (jit, custom_jvp/vjp, cond, while, scan, remat). Real floats are computed
in float64, complex in complex128, integers exactly in their own dtype (wrap-around,
shifts and division as XLA defines them), so the result is a reference for every
device, not JAX compared with itself.

    >>> cj, dyn = trace(h, h.make_args())
    >>> outs = evaluate(cj, *dyn)            # float64 / complex128 / exact ints
    >>> promised = out_dtypes(cj)            # the dtypes the device results have

The verdict on a device's outputs against it is the judge's (``farm.judge.jaxpr``:
reference, invariant for non-unique results, or none with a reason); ``plan(cj)`` says
which each output gets without running anything, and ``coverage(harnesses)`` counts it
per group.
``reference_for(h)`` gives a callable over the harness's arguments, or None when some
primitive in its jaxpr has no rule.

Imports only NumPy, SciPy and JAX.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from farm.reference import control, elementwise, linalg, linalg_dot, random, reductions, shapes  # noqa: F401  (register rules)
from farm.reference.evaluator import (
    RULES, AmbiguousResult, UnsupportedPrimitive, call_jaxpr, primitives, ref_dtype, register,
)
from farm.reference.coverage import coverage, to_markdown as coverage_markdown, trace, verdict_kind
from farm.reference.plan import Plan, plan

__all__ = [
    "RULES", "AmbiguousResult", "Plan", "UnsupportedPrimitive", "coverage", "coverage_markdown", "evaluate",
    "missing", "out_dtypes", "plan", "primitives", "ref_dtype", "reference_for", "register",
    "trace", "verdict_kind",
]


def evaluate(closed_jaxpr: Any, *args: Any) -> list[np.ndarray]:
    """The outputs of ``closed_jaxpr`` on ``args``: float64/complex128 for inexact
    outputs, the promised integer/bool dtype otherwise.

    Raises:
        UnsupportedPrimitive: an equation's primitive has no rule.
        AmbiguousResult: the result is not unique (a scatter with conflicting writes...).
    """
    return call_jaxpr(closed_jaxpr, list(args))


def out_dtypes(closed_jaxpr: Any) -> list[np.dtype]:
    """The dtypes the jaxpr promises for its outputs (what a device returns)."""
    return [np.dtype(a.dtype) for a in closed_jaxpr.out_avals]


def missing(closed_jaxpr: Any) -> list[str]:
    """The primitives in ``closed_jaxpr`` (and its sub-jaxprs) that have no rule, sorted."""
    return sorted(p for p in primitives(closed_jaxpr.jaxpr) if p not in RULES)


def reference_for(h: Any) -> Callable[..., list[np.ndarray]] | None:
    """A reference for harness ``h``: called with the harness's arguments (all of them,
    in their own dtypes), returns the evaluated outputs. None if some primitive has no
    rule or the harness does not trace."""
    try:
        cj, _ = trace(h, h.make_args())
    except Exception:  # a harness that does not trace has no reference
        return None
    if missing(cj):
        return None
    static = set(h.static_argnums())

    def reference(*args: Any) -> list[np.ndarray]:
        return evaluate(cj, *(a for i, a in enumerate(args) if i not in static))

    functools.update_wrapper(reference, h.fun, assigned=("__name__",), updated=())
    return reference
