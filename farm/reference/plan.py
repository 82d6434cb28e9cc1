"""Which outputs of a jaxpr the reference can judge, and how: a structural pass, no numbers.

Each output of a harness's jaxpr gets one of three verdict kinds:

- ``reference``: every value it depends on is unique; compared with the float64 result.
- ``invariant``: it is a non-unique output of one equation (``farm.reference.invariants``)
  that reaches the harness's outputs unchanged (through calls such as ``pjit``); checked by
  that equation's invariant.
- ``none``, with the reason: a primitive has no rule, or the output was computed *from* a
  non-unique value (an eigenvector times something), which no invariant describes.

``plan(closed_jaxpr)`` is cheap (one walk over the equations) and is what ``farm
coverage`` counts; ``farm.judge.jaxpr`` follows the same plan with the numbers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.reference.evaluator import RULES, primitives
from farm.reference.invariants import non_unique

#: Primitives that call their sub-jaxpr once with their own operands: their outputs are
#: their sub-jaxpr's, so a non-unique output passes through them unchanged.
CALLS = frozenset({"jit", "pjit", "closed_call", "core_call", "remat", "remat2", "checkpoint", "custom_jvp_call",
                   "custom_vjp_call", "custom_vjp_call_jaxpr"})


@dataclass(frozen=True)
class Direct:
    """Output ``index`` of the non-unique equation ``eqn``, unchanged."""

    eqn: Any
    index: int


@dataclass(frozen=True)
class Derived:
    """Computed from a non-unique value: no reference and no invariant."""

    reason: str


@dataclass(frozen=True)
class OutputPlan:
    kind: str  # reference | invariant | none
    reason: str | None = None  # why none; for invariant: which primitive's invariant
    eqn: Any = None
    index: int = 0


@dataclass(frozen=True)
class Plan:
    outputs: tuple[OutputPlan, ...]

    @property
    def verdict(self) -> str:
        """The harness's verdict kind: ``none`` if any output has none, else ``invariant``
        if any output needs one, else ``reference``."""
        kinds = {o.kind for o in self.outputs}
        return "none" if "none" in kinds else "invariant" if "invariant" in kinds else "reference"

    @property
    def reason(self) -> str | None:
        """For ``none``: the first output's reason; for ``invariant``: which invariants."""
        if self.verdict == "none":
            return next(o.reason for o in self.outputs if o.kind == "none")
        if self.verdict == "invariant":
            return "invariant: " + ", ".join(sorted({o.reason for o in self.outputs if o.kind == "invariant"}))
        return None

    @property
    def taps(self) -> frozenset[int]:
        return frozenset(id(o.eqn) for o in self.outputs if o.kind == "invariant")


def plan(closed_jaxpr: Any) -> Plan:
    """The verdict kind of each output of ``closed_jaxpr``."""
    jaxpr = closed_jaxpr.jaxpr
    gaps = sorted(p for p in primitives(jaxpr) if p not in RULES)
    if gaps:
        why = f"no reference rule for {gaps[0]}" + (f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else "")
        return Plan(tuple(OutputPlan("none", why) for _ in jaxpr.outvars))
    marks = _walk(jaxpr, [None] * len(jaxpr.invars))
    out = []
    for m in marks:
        if m is None:
            out.append(OutputPlan("reference"))
        elif isinstance(m, Direct):
            out.append(OutputPlan("invariant", m.eqn.primitive.name, m.eqn, m.index))
        else:
            out.append(OutputPlan("none", m.reason))
    return Plan(tuple(out))


def _sub(params: dict[str, Any]) -> Any:
    return params.get("jaxpr", params.get("call_jaxpr", params.get("fun_jaxpr")))


def _walk(jaxpr: Any, in_marks: list[Any]) -> list[Any]:
    """The mark (None, Direct or Derived) of each output of ``jaxpr``, given its inputs'."""
    env: dict[Any, Any] = dict(zip(jaxpr.invars, in_marks))
    for eqn in jaxpr.eqns:
        ins = [None if type(v).__name__ == "Literal" else env.get(v) for v in eqn.invars]
        name = eqn.primitive.name
        sub = _sub(eqn.params) if name in CALLS else None
        if sub is not None:
            inner = getattr(sub, "jaxpr", sub)
            outs = _walk(inner, ins[len(ins) - len(inner.invars):]) if len(inner.invars) <= len(ins) else \
                [Derived(f"{name} with an unexpected signature")] * len(eqn.outvars)
        else:
            outs = _marks(eqn, ins)
        for v, m in zip(eqn.outvars, outs):
            env[v] = m
    return [None if type(v).__name__ == "Literal" else env.get(v) for v in jaxpr.outvars]


def _marks(eqn: Any, ins: list[Any]) -> list[Any]:
    """The marks of one (non-call) equation's outputs."""
    name, n = eqn.primitive.name, len(eqn.outvars)
    tainted = [m for m in ins if m is not None]
    if tainted:
        first = tainted[0]
        why = first.reason if isinstance(first, Derived) else \
            f"computed by {name} from {first.eqn.primitive.name}'s non-unique output"
        return [Derived(why)] * n
    inner = _inner_non_unique(eqn)
    if inner:
        return [Derived(f"{name} contains {inner}, whose result is not unique")] * n
    nu = non_unique(name, eqn.params, n)
    return [Direct(eqn, i) if i in nu else None for i in range(n)]


def _inner_non_unique(eqn: Any) -> str | None:
    """A non-unique primitive inside a control-flow equation's sub-jaxprs, if any."""
    for p in eqn.params.values():
        for sub in (p if isinstance(p, (tuple, list)) else (p,)):
            inner = sub if hasattr(sub, "eqns") else getattr(sub, "jaxpr", None)
            if inner is None or not hasattr(inner, "eqns"):
                continue
            for e in inner.eqns:
                if non_unique(e.primitive.name, e.params, len(e.outvars)):
                    return e.primitive.name
                nested = _inner_non_unique(e)
                if nested:
                    return nested
    return None
