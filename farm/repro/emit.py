"""A (small) closed jaxpr as readable ``jax.lax`` code, checked by tracing it back.

Each equation becomes the public ``lax`` function of its primitive where one exists
(``lax.log1p(a)``), with the equation's parameters as keywords when they are needed,
else ``lax.<name>_p.bind(...)``. Every line is traced again and must give back the same
primitive, parameters and output types, so the emitted code computes exactly what the
jaxpr does; an equation that cannot be written so raises ``Unemittable`` (the caller
falls back to the serialized export).
"""
from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np


class Unemittable(Exception):
    """An equation or parameter has no faithful source form."""


def value(v: Any) -> str:
    """Python source for one parameter or literal value."""
    if v is None or isinstance(v, (bool, str)):
        return repr(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return repr(v)
    if isinstance(v, float):
        return f"float({str(v)!r})" if not math.isfinite(v) else repr(v)
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return f"jnp.dtype({np.dtype(v).name!r})"
    if isinstance(v, np.generic) or (isinstance(v, np.ndarray) and v.ndim == 0):
        return scalar(np.asarray(v))
    if isinstance(v, enum.Enum):
        name = type(v).__name__
        return f"lax.{name}.{v.name}" if _in_lax(name) else _raise(v)
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        name = type(v).__name__
        if not _in_lax(name):
            _raise(v)
        return f"lax.{name}(" + ", ".join(f"{f}={value(getattr(v, f))}" for f in v._fields) + ")"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(value(x) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else (f"({inner})" if isinstance(v, tuple)
                                                                          else f"[{inner}]")
    return _raise(v)


def _in_lax(name: str) -> bool:
    from jax import lax

    return hasattr(lax, name)


def _raise(v: Any) -> str:
    raise Unemittable(f"no source form for {type(v).__name__}: {v!r}"[:200])


def scalar(a: np.ndarray) -> str:
    """One 0-d array as an exact constructor: ``np.float64(-0.412...)``, ``jnp.bfloat16(...)``."""
    a = np.asarray(a)
    name = a.dtype.name
    ctor = f"np.{name}" if hasattr(np, name) and name != "bool" else f"jnp.{name}"
    if name == "bool":
        return f"np.bool_({bool(a)})"
    x = a.item() if a.dtype.kind in "biufc" else float(a.astype(np.float64))
    part = np.float32 if name in ("float32", "complex64") else np.float64
    if isinstance(x, complex):
        return f"{ctor}(complex({_f(x.real, part)}, {_f(x.imag, part)}))"
    return f"{ctor}({_f(x, part) if isinstance(x, float) else repr(x)})"


def _f(x: float, dtype: Any = np.float64) -> str:
    """Exact source for a float of ``dtype``: the shortest decimal that gives it back."""
    if not math.isfinite(x):
        return f"float({str(x)!r})"
    short = str(np.dtype(dtype).type(x)) if np.dtype(dtype) == np.float32 else repr(x)
    return short if float(np.dtype(dtype).type(float(short))) == x else repr(x)


def array(a: np.ndarray) -> str:
    """A small array as source (exact values)."""
    a = np.asarray(a)
    if a.ndim == 0:
        return scalar(a)
    dt = f"np.{a.dtype.name}" if hasattr(np, a.dtype.name) else f"jnp.{a.dtype.name}"
    wide = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) if a.dtype.kind not in "biu" else a
    part = np.float32 if a.dtype.name in ("float32", "complex64") else np.float64
    items = [repr(x) if not isinstance(x, float) and not isinstance(x, complex) else
             (f"complex({_f(x.real, part)}, {_f(x.imag, part)})" if isinstance(x, complex) else _f(x, part))
             for x in wide.reshape(-1).tolist()]
    return f"np.array([{', '.join(items)}], dtype={dt}).reshape({a.shape})"


def _line(eqn: Any, ins: list[str], form: str) -> str:
    name = eqn.primitive.name
    params = ", ".join(f"{k}={value(v)}" for k, v in eqn.params.items())
    args = ", ".join(ins)
    if form == "bind":
        return f"lax.{name}_p.bind({args}{', ' if params and args else ''}{params})"
    if form == "plain":
        return f"lax.{name}({args})"
    return f"lax.{name}({args}{', ' if params and args else ''}{params})"


def _same(eqn: Any, code: str, avals: list[Any]) -> bool:
    """Does ``code`` (over a0, a1...) trace to one equation like ``eqn``?"""
    import jax
    import jax.numpy as jnp
    from jax import lax

    names = [f"a{i}" for i in range(len(avals))]
    try:
        fn = eval(f"lambda {', '.join(names)}: {code}", {"lax": lax, "jnp": jnp, "np": np})  # noqa: S307
        got = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
    except Exception:
        return False
    eqns = got.jaxpr.eqns
    if len(eqns) != 1 or eqns[0].primitive is not eqn.primitive:
        return False
    outs = [(v.aval.shape, v.aval.dtype) for v in eqns[0].outvars]
    return outs == [(v.aval.shape, v.aval.dtype) for v in eqn.outvars] and \
        repr(sorted(eqns[0].params.items())) == repr(sorted(eqn.params.items()))


def _fewer(eqn: Any, ins: list[str], placeholders: list[str], avals: list[Any]) -> str:
    """The keywords form without the parameters the function's defaults already give."""
    params = dict(eqn.params)
    args = ", ".join(placeholders)
    for k in list(params):
        trial = {p: v for p, v in params.items() if p != k}
        kw = ", ".join(f"{p}={value(v)}" for p, v in trial.items())
        if _same(eqn, f"lax.{eqn.primitive.name}({args}{', ' if kw else ''}{kw})", avals):
            params = trial
    kw = ", ".join(f"{p}={value(v)}" for p, v in params.items())
    return f"lax.{eqn.primitive.name}({', '.join(ins)}{', ' if kw else ''}{kw})"


def function(closed: Any, name: str = "f") -> str:
    """``def f(a, b): ...`` computing ``closed`` (a flat jaxpr without constants)."""
    from jax._src import core

    j = closed.jaxpr
    if j.constvars:
        raise Unemittable("the jaxpr closes over constants")
    names: dict[Any, str] = {}
    counter = iter(range(10**6))

    def fresh() -> str:
        n = next(counter)
        return "abcdefghijklmnopqrstuvwxyz"[n] if n < 26 else f"v{n}"

    for v in j.invars:
        names[v] = fresh()
    lines = [f"def {name}({', '.join(names[v] for v in j.invars)}):"]
    for eqn in j.eqns:
        ins = [scalar(np.asarray(v.val, dtype=v.aval.dtype)) if isinstance(v, core.Literal) else names[v]
               for v in eqn.invars]
        avals = [v.aval for v in eqn.invars]
        placeholders = [f"a{i}" for i in range(len(ins))]
        for form in ("plain", "keywords", "bind"):
            probe = _line(eqn, placeholders, form)  # Unemittable: a parameter has no source form
            if _same(eqn, probe, avals):
                code = _line(eqn, ins, form) if form != "keywords" else _fewer(eqn, ins, placeholders, avals)
                break
        else:
            raise Unemittable(f"{eqn.primitive.name}: no lax call traces back to the same equation")
        outs = []
        for v in eqn.outvars:
            names[v] = fresh()
            outs.append(names[v] if type(v).__name__ != "DropVar" else "_")
        lines.append(f"    {', '.join(outs)}{',' if len(outs) == 1 and eqn.primitive.multiple_results else ''} = {code}")
    ret = [names[v] if not isinstance(v, core.Literal) else scalar(np.asarray(v.val)) for v in j.outvars]
    lines.append(f"    return {', '.join(ret)}")
    return "\n".join(lines) + "\n"
