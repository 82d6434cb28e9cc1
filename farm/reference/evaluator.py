"""The jaxpr interpreter: one rule per primitive, applied equation by equation.

Values are NumPy arrays in a *reference dtype*: float64 for every real floating
dtype (float16, bfloat16, float32, float64...), complex128 for complex, and the
jaxpr's own dtype for integers and bool (so integer arithmetic wraps exactly as
the device's does). ``ref_dtype`` says which.

A rule is a function ``rule(ctx, *args, **params)`` registered for one or more
primitive names with ``@register("name", ...)``. ``ctx`` carries the equation's
input and output avals and a way to evaluate sub-jaxprs. A rule returns one array
(or a list when the primitive has several results); the interpreter casts each
result to the reference dtype of the aval the jaxpr promised.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.errors import FarmError


class UnsupportedPrimitive(FarmError):
    """A jaxpr uses a primitive that has no reference rule."""

    def __init__(self, primitive: str):
        super().__init__(f"no reference rule for primitive {primitive!r}")
        self.primitive = primitive


class AmbiguousResult(FarmError):
    """The primitive's result is not unique for these inputs (e.g. a scatter that writes
    two different values to one element): there is nothing to compare against."""


Rule = Callable[..., Any]
RULES: dict[str, Rule] = {}

#: Equations whose inputs and reference outputs are kept while evaluating (``tapping``),
#: keyed by ``id(eqn)``: the invariant checks of non-unique results need them.
_TAPS: ContextVar[tuple[frozenset[int], dict[int, "Tap"]] | None] = ContextVar("farm_reference_taps", default=None)


#: The value a rule writes where a primitive leaves its result unspecified (cholesky_p's
#: upper triangle). The verdict evaluates twice with two fillings: outputs that change
#: depend on the unspecified part and are not compared there.
_FILL: ContextVar[float] = ContextVar("farm_reference_fill", default=0.0)

#: Evaluate as a device that flushes subnormals to zero (XLA's CPU backend does, for
#: float32/bfloat16/float64 inputs and results): every floating value below its dtype's
#: smallest normal, read or written by an equation, becomes a zero of the same sign.
_FLUSH: ContextVar[bool] = ContextVar("farm_reference_flush", default=False)


@contextmanager
def flushing_subnormals() -> Iterator[None]:
    token = _FLUSH.set(True)
    try:
        yield
    finally:
        _FLUSH.reset(token)


def flushed(x: np.ndarray, dtype: Any) -> np.ndarray:
    """``x`` (held for ``dtype``) with values below ``dtype``'s smallest normal made ±0: what a
    device that flushes subnormal inputs (XLA:CPU does) reads."""
    if key_impl(dtype) is not None:
        return x
    dt = np.dtype(dtype)
    if dt.kind not in "fcV" and dt.name != "bfloat16":
        return x
    import ml_dtypes  # noqa: PLC0415  (already loaded by jax)

    real = np.dtype(np.float32 if dt == np.complex64 else np.float64) if dt.kind == "c" else dt
    tiny = float(ml_dtypes.finfo(real).tiny)

    def f(v: np.ndarray) -> np.ndarray:
        return np.where(np.abs(v) < tiny, np.copysign(0.0, v), v)
    return f(x.real) + 1j * f(x.imag) if np.iscomplexobj(x) else f(x)


#: Primitives whose rules write ``unspecified()`` somewhere.
PARTLY_UNSPECIFIED = frozenset({"cholesky"})


def unspecified() -> float:
    """The filling for an unspecified part of a result (see ``filling``)."""
    return _FILL.get()


@contextmanager
def filling(value: float) -> Iterator[None]:
    token = _FILL.set(value)
    try:
        yield
    finally:
        _FILL.reset(token)


@dataclass(frozen=True)
class Tap:
    """One evaluated equation: its reference-dtype inputs and outputs and its params."""

    primitive: str
    ins: tuple[np.ndarray, ...]
    outs: tuple[np.ndarray, ...]
    params: dict[str, Any]
    calls: int = 1  # > 1: the equation ran more than once (inside a loop): no single value


@contextmanager
def tapping(eqn_ids: frozenset[int]) -> Iterator[dict[int, Tap]]:
    """Keep the inputs and outputs of the equations ``eqn_ids`` evaluated in this block."""
    taps: dict[int, Tap] = {}
    token = _TAPS.set((eqn_ids, taps))
    try:
        yield taps
    finally:
        _TAPS.reset(token)


def register(*names: str) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the reference rule for each primitive in ``names``."""
    def deco(fn: Rule) -> Rule:
        for n in names:
            if n in RULES:
                raise ValueError(f"primitive {n!r} already has a reference rule")
            RULES[n] = fn
        return fn
    return deco


def key_impl(dtype: Any) -> Any:
    """The PRNG implementation of a key dtype (``key<fry>``), or None for an array dtype."""
    return None if isinstance(dtype, np.dtype) else getattr(dtype, "_impl", None)


def physical_shape(aval: Any) -> tuple[int, ...]:
    """The shape of the value held for ``aval``: a key array is held as its key data."""
    impl = key_impl(aval.dtype)
    return tuple(aval.shape) + (tuple(impl.key_shape) if impl is not None else ())


def ref_dtype(dtype: Any) -> np.dtype:
    """The dtype a value of ``dtype`` is held in while evaluating."""
    if key_impl(dtype) is not None:
        return np.dtype(np.uint32)  # PRNG keys: their uint32 key data
    dt = np.dtype(dtype)
    if dt == np.bool_ or np.issubdtype(dt, np.integer):
        return dt
    if np.issubdtype(dt, np.complexfloating):
        return np.dtype(np.complex128)
    return np.dtype(np.float64)  # float16/bfloat16/float8*/float32/float64 are all real floats


def is_float(dtype: Any) -> bool:
    dt = np.dtype(dtype)
    return not (dt == np.bool_ or np.issubdtype(dt, np.integer) or np.issubdtype(dt, np.complexfloating))


def to_ref(x: Any, dtype: Any) -> np.ndarray:
    """``x`` (of jaxpr dtype ``dtype``) as an array of the reference dtype."""
    if key_impl(dtype) is not None:
        if not isinstance(x, np.ndarray):
            import jax  # noqa: PLC0415

            x = jax.random.key_data(x)
        return np.asarray(x, dtype=np.uint32)
    arr = np.asarray(x)
    want = ref_dtype(dtype)
    if arr.dtype == want:
        return arr
    if np.issubdtype(want, np.integer) and not np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_:
        raise TypeError(f"cannot hold a {arr.dtype} value as {np.dtype(dtype).name} without a conversion rule")
    with np.errstate(all="ignore"):
        return np.asarray(arr.astype(want))


@dataclass(frozen=True)
class Ctx:
    """What a rule may need besides its operands."""

    primitive: str
    in_avals: tuple[Any, ...]
    out_avals: tuple[Any, ...]

    @property
    def out_dtype(self) -> np.dtype:
        return np.dtype(self.out_avals[0].dtype)

    @property
    def in_dtype(self) -> np.dtype:
        return np.dtype(self.in_avals[0].dtype)

    def call(self, closed_or_open: Any, *args: Any, consts: Sequence[Any] = ()) -> list[np.ndarray]:
        """Evaluate a sub-jaxpr (a ``ClosedJaxpr``, or an open ``Jaxpr`` with ``consts``)."""
        return call_jaxpr(closed_or_open, list(args), consts)


def call_jaxpr(jaxpr: Any, args: list[Any], consts: Sequence[Any] = ()) -> list[np.ndarray]:
    """Evaluate a ``ClosedJaxpr`` (its own consts) or an open ``Jaxpr`` (``consts``)."""
    if hasattr(jaxpr, "consts") and hasattr(jaxpr, "jaxpr"):
        return eval_jaxpr(jaxpr.jaxpr, list(jaxpr.consts), args)
    return eval_jaxpr(jaxpr, list(consts), args)


def _read(env: dict[Any, np.ndarray], v: Any) -> np.ndarray:
    if type(v).__name__ == "Literal":
        return to_ref(v.val, v.aval.dtype)
    return env[v]


def eval_jaxpr(jaxpr: Any, consts: list[Any], args: list[Any]) -> list[np.ndarray]:
    """Evaluate an open jaxpr on reference-dtype values."""
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env: dict[Any, np.ndarray] = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = to_ref(x, v.aval.dtype)
    for v, x in zip(jaxpr.invars, args):
        env[v] = to_ref(x, v.aval.dtype)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        rule = RULES.get(name)
        if rule is None:
            raise UnsupportedPrimitive(name)
        ctx = Ctx(name, tuple(v.aval for v in eqn.invars), tuple(v.aval for v in eqn.outvars))
        ins = [_read(env, v) for v in eqn.invars]
        flush = _FLUSH.get()
        if flush:
            ins = [flushed(x, v.aval.dtype) for x, v in zip(ins, eqn.invars)]
        with np.errstate(all="ignore"):
            out = rule(ctx, *ins, **eqn.params)
        outs = list(out) if eqn.primitive.multiple_results else [out]
        if len(outs) != len(eqn.outvars):
            raise AssertionError(f"rule for {name} returned {len(outs)} results, want {len(eqn.outvars)}")
        for v, x in zip(eqn.outvars, outs):
            x = np.asarray(x)
            with np.errstate(all="ignore"):
                x = x.astype(ref_dtype(v.aval.dtype), copy=False)
                if flush:
                    x = flushed(x, v.aval.dtype)
            if x.shape != physical_shape(v.aval):
                raise AssertionError(f"rule for {name} gave shape {x.shape}, jaxpr promised {physical_shape(v.aval)}")
            if type(v).__name__ != "DropVar":
                env[v] = x
        _tap(eqn, ins, outs)
    return [_read(env, v) for v in jaxpr.outvars]


def _tap(eqn: Any, ins: list[np.ndarray], outs: list[Any]) -> None:
    active = _TAPS.get()
    if active is None or id(eqn) not in active[0]:
        return
    taps = active[1]
    prev = taps.get(id(eqn))
    taps[id(eqn)] = Tap(eqn.primitive.name, tuple(ins), tuple(np.asarray(o) for o in outs), dict(eqn.params),
                        calls=1 if prev is None else prev.calls + 1)


def primitives(jaxpr: Any, out: set[str] | None = None) -> set[str]:
    """Every primitive name in ``jaxpr`` and its sub-jaxprs."""
    out = set() if out is None else out
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr) if not hasattr(jaxpr, "eqns") else jaxpr
    for eqn in jaxpr.eqns:
        out.add(eqn.primitive.name)
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                if hasattr(sub, "eqns"):
                    primitives(sub, out)
                elif hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    primitives(sub.jaxpr, out)
    return out
