"""trace: ``jax.jit(f).trace(*args)``; jaxpr size and the primitives seen."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from farm.catalog import Harness
from farm.stages.record import Timer, failure
from farm.results import Record


@dataclass(frozen=True, slots=True)
class TraceHandle:
    """What later stages need of a trace (``Traced.handle``; live objects, never stored)."""

    traced: Any  # jax.stages.Traced
    jitted: Any  # the jitted function over the dynamic arguments (statics bound)
    dyn: list[Any]  # the dynamic arguments it is called with


@dataclass(frozen=True, slots=True)
class Traced(Record):
    """The traced function; ``handle`` is a ``TraceHandle``."""

    @property
    def promised(self) -> list[dict[str, Any]] | None:
        """Each output's dtype and shape, as tracing promised them (``facts["outputs"]``)."""
        return self.facts.get("outputs")


def _primitives(jaxpr: Any, out: dict[str, int]) -> None:
    for eqn in jaxpr.eqns:
        out[eqn.primitive.name] = out.get(eqn.primitive.name, 0) + 1
        for sub in eqn.params.values():
            inner = getattr(sub, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns"):
                _primitives(inner, out)
            elif hasattr(sub, "eqns"):
                _primitives(sub, out)


def jitted(h: Harness, args: list[Any]) -> tuple[Any, list[Any]]:
    """The jitted function over the dynamic args only (statics bound by partial)."""
    import jax

    static = h.static_argnums()
    if not static:
        return jax.jit(h.fun), list(args)
    fixed = {i: args[i] for i in static}
    dyn_idx = [i for i in range(len(args)) if i not in fixed]

    def f(*dyn: Any) -> Any:
        full = [None] * len(args)
        for i, v in fixed.items():
            full[i] = v
        for i, v in zip(dyn_idx, dyn):
            full[i] = v
        return h.fun(*full)

    functools.update_wrapper(f, h.fun, assigned=("__name__",), updated=())
    return jax.jit(f), [args[i] for i in dyn_idx]


def run(h: Harness, args: list[Any], abstract: Callable[[list[Any]], list[Any]] | None = None) -> Traced:
    """``abstract``: maps the dynamic arguments to what is traced and called instead
    (sharded arrays on a mesh, or shape/dtype structs on an abstract mesh larger than
    this host)."""
    timer = Timer()
    try:
        with timer():
            jf, dyn = jitted(h, args)
            if abstract is not None:
                dyn = abstract(dyn)
            traced = jf.trace(*dyn)
        jaxpr = traced.jaxpr
        prims: dict[str, int] = {}
        _primitives(jaxpr.jaxpr, prims)
        outs = [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in traced.out_info_flat()] \
            if hasattr(traced, "out_info_flat") else _out_avals(jaxpr)
        return Traced("trace", "any", "ok", timer.seconds,
                      metrics={"eqns": float(len(jaxpr.jaxpr.eqns))},
                      facts={"primitives": prims, "outputs": outs},
                      handle=TraceHandle(traced, jf, dyn))
    except Exception as e:  # a harness exception is a result
        return failure(Traced, "trace", "any", e, timer.seconds)


def _out_avals(closed_jaxpr: Any) -> list[dict[str, Any]]:
    return [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in closed_jaxpr.out_avals]
