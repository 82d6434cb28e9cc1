"""A harness's computation as one flat list of equations, and the sub-programs the
minimizer cuts out of it.

Calls (``jit``/``pjit``, ``closed_call``, custom JVP/VJP wrappers) are inlined, so every
equation is one primitive the minimizer can keep or drop; control flow (``while``,
``cond``, ``scan``) stays one equation with its bodies. Values are named by where they
come from, never by object identity, so the parent and an isolated worker that traced
the same harness agree on every name: ``a3`` is the fourth argument, ``e7_0`` the first
output of equation 7.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: Call-like primitives whose body is inlined, and the parameter that holds it.
_CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "remat": "jaxpr", "checkpoint": "jaxpr"}


def _body(eqn: Any) -> Any | None:
    key = _CALLS.get(eqn.primitive.name)
    sub = eqn.params.get(key) if key else None
    if sub is None:
        return None
    return sub if hasattr(sub, "consts") else _Closed(sub, ())


@dataclass(frozen=True)
class _Closed:
    jaxpr: Any
    consts: Sequence[Any]


def bind(eqn: Any, ins: Sequence[Any]) -> list[Any]:
    """Apply one equation's primitive to ``ins`` (under whatever trace is current)."""
    bp = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = bp if isinstance(bp, tuple) else ((), bp)  # (subfuns, params) before jax 0.7
    out = eqn.primitive.bind(*subfuns, *ins, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _inline(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    from jax._src import core

    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        sub = _body(eqn)
        outs = _inline(sub.jaxpr, sub.consts, ins) if sub is not None else bind(eqn, ins)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def flatten(closed: Any, dyn: Sequence[Any]) -> Any:
    """The closed jaxpr re-traced with every call inlined."""
    import jax

    return jax.make_jaxpr(lambda *a: _inline(closed.jaxpr, closed.consts, a))(*dyn)


@dataclass(frozen=True)
class Program:
    """A flat closed jaxpr with every value named (``a<i>``, ``c<i>``, ``e<j>_<k>``)."""

    closed: Any

    @property
    def jaxpr(self) -> Any:
        return self.closed.jaxpr

    def names(self) -> dict[Any, str]:
        """Var -> name (literals have none)."""
        j = self.jaxpr
        out = {v: f"a{i}" for i, v in enumerate(j.invars)}
        out.update({v: f"c{i}" for i, v in enumerate(j.constvars)})
        for n, eqn in enumerate(j.eqns):
            out.update({v: f"e{n}_{k}" for k, v in enumerate(eqn.outvars)})
        return out

    def outputs(self) -> list[str]:
        """The names of the program's outputs (a literal output has the name ``lit``)."""
        names = self.names()
        return [names.get(v, "lit") for v in self.jaxpr.outvars]

    def consts(self) -> dict[str, Any]:
        return {f"c{i}": c for i, c in enumerate(self.closed.consts)}

    def cone(self, outs: Sequence[str]) -> list[int]:
        """The equations the values ``outs`` depend on, in program order."""
        names = self.names()
        producer = {f"e{n}_{k}": n for n, eqn in enumerate(self.jaxpr.eqns) for k in range(len(eqn.outvars))}
        todo = [producer[o] for o in outs if o in producer]
        seen: set[int] = set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo += [producer[names[v]] for v in self.jaxpr.eqns[n].invars if names.get(v) in producer]
        return sorted(seen)

    def free(self, keep: Sequence[int], outs: Sequence[str]) -> list[str]:
        """The values a sub-program takes as inputs: used by the kept equations (or
        returned) but defined by none of them; constants stay constants."""
        names = self.names()
        defined = {names[v] for n in keep for v in self.jaxpr.eqns[n].outvars}
        need: list[str] = []
        for n in sorted(keep):
            for v in self.jaxpr.eqns[n].invars:
                name = names.get(v)
                if name is not None and name not in defined and not name.startswith("c") and name not in need:
                    need.append(name)
        need += [o for o in outs if o not in defined and o not in need]
        return sorted(need, key=_order)

    def function(self, keep: Sequence[int], outs: Sequence[str]) -> tuple[Callable[..., list[Any]], list[str]]:
        """(f, input names): f evaluates the kept equations on those inputs, returns ``outs``."""
        from jax._src import core

        eqns = [self.jaxpr.eqns[n] for n in sorted(keep)]
        names = self.names()
        inputs = self.free(keep, outs)
        consts = self.consts()

        def f(*args: Any) -> list[Any]:
            env = dict(consts)
            env.update(zip(inputs, args))
            for eqn in eqns:
                ins = [v.val if isinstance(v, core.Literal) else env[names[v]] for v in eqn.invars]
                env.update((names[v], x) for v, x in zip(eqn.outvars, bind(eqn, ins)))
            return [env[o] for o in outs]

        return f, inputs


def _order(name: str) -> tuple[int, int, int]:
    """Arguments first, then intermediates in program order."""
    if name.startswith("a"):
        return (0, int(name[1:]), 0)
    n, k = name[1:].split("_")
    return (1, int(n), int(k))
