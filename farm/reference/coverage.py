"""How much of a catalog gets an independent numeric verdict, and why the rest does not.

``coverage(harnesses)`` traces each harness (nothing runs) and asks the plan
(``farm.reference.plan``) which verdict its outputs get: ``reference`` (the float64
jaxpr evaluation), ``invariant`` (a non-unique result checked by its defining property)
or ``none``, with the named reason. ``to_markdown`` renders it; the dict is the JSON.
The same shape, built from a run's compare records instead, is
``farm.analysis.verdicts.from_records``: what the verdicts were, not what they will be.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from farm.results import VERDICT_KINDS, verdict_table
from farm.stages import compat
from farm.reference.plan import plan

KINDS = VERDICT_KINDS


def coverage(harnesses: Iterable[Any], progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None
             ) -> dict[str, Any]:
    """Per group: how many harnesses get an independent verdict, and of which kind
    (``reference``: every output compared with the float64 evaluation; ``invariant``:
    some output is not unique and is checked by its defining property; ``none``), with
    the named reason for each ``none`` (a primitive without a rule, an output computed
    from a non-unique value, a harness that does not trace).

    Returns ``{"total", "reference", "invariant", "none", "reasons": {reason: n},
    "groups": {group: {the same keys}}}``. Static: traces each harness, runs nothing.
    """
    return verdict_table((h.group, *verdict_kind(h)) for h in (progress or (lambda x: x))(harnesses))


def verdict_kind(h: Any) -> tuple[str, str | None]:
    """(reference | invariant | none, the reason for none or which invariants) of one harness:
    what the compare stage will judge its outputs by, wherever they run."""
    if h.invariant is not None:
        return "invariant", "the harness's own invariant"
    if h.reference is not None:
        return "reference", "the harness's own float64 reference"
    import jax  # noqa: PLC0415  (already loaded by trace's import; here for enable_x64)

    try:
        with compat.enable_x64(h.needs_x64):
            cj, _ = trace(h, h.make_args())
    except Exception as e:  # a harness exception is a reason, not a crash
        return "none", f"does not trace: {type(e).__name__}"
    p = plan(cj)
    return p.verdict, p.reason


def trace(h: Any, args: list[Any]) -> tuple[Any, list[Any]]:
    """(closed jaxpr over the dynamic args, the dynamic args), as the farm's trace stage does."""
    import jax  # noqa: PLC0415  (loaded by any caller that traces)

    from farm.stages.trace import jitted  # noqa: PLC0415  (the farm's one definition of static args)

    jf, dyn = jitted(h, args)
    return jax.make_jaxpr(jf)(*dyn), dyn


def to_markdown(cov: dict[str, Any], title: str = "Independent numeric verdicts") -> str:
    """A per-group table of verdict kinds, then the reasons for ``none``."""
    total = max(cov["total"], 1)
    lines = [f"## {title}", "",
             f"{cov['total']} harnesses: reference {cov['reference']} ({100 * cov['reference'] / total:.1f}%), "
             f"invariant {cov['invariant']} ({100 * cov['invariant'] / total:.1f}%), "
             f"none {cov['none']} ({100 * cov['none'] / total:.1f}%). "
             "*reference*: every output compared with the float64 evaluation of the harness's jaxpr (or the "
             "harness's own reference); *invariant*: a non-unique result checked by its defining property; "
             "*none*: no independent check, for the reason given.", "",
             "| group | harnesses | reference | invariant | none | why none |", "|---|---:|---:|---:|---:|---|"]
    for g, c in cov["groups"].items():
        why = "; ".join(f"{r} ({n})" for r, n in c["reasons"].items()).replace("|", "\\|")
        lines.append(f"| {g} | {c['total']} | {c['reference']} | {c['invariant']} | {c['none']} | {why} |")
    if cov["reasons"]:
        lines += ["", "| reason for none | harnesses |", "|---|---:|"]
        lines += [f"| {r} | {n} |" for r, n in cov["reasons"].items()]
    return "\n".join(lines) + "\n"
