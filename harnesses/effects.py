"""Effects and callbacks (issue 43): ``jax.debug.print``, ordered and unordered
``io_callback``, ``pure_callback``, a sequence of ordered callbacks, and
``lax.platform_dependent``, each with the effects it must show (``Effects``): the lines
printed, what the callbacks received and in which order, the branch each platform takes.

The ``effects_export`` stage exports each for all four platforms, for (cpu, cuda) and for
each platform alone, and runs what JAX lets it run on the CPU (docs/effects.md). What
JAX refuses with its own error is a ``Limitation`` naming that error; the ``TypeError`` of
``jax.debug.print`` in a multi-platform export is a JAX bug (docs/findings.md), declared
so the family's sweep is clean while the bug stays visible (an ``expected_fail``, an
``unexpected_pass`` once JAX fixes it).
"""
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.experimental import io_callback

from farm.catalog import CustomArg, Effects, Limitation, define
from farm.catalog.effects import Log, discard, label

FAMILY = "effects"
GROUP = "effects"
ALL = ("cpu", "cuda", "rocm", "tpu")
MULTI = (label(ALL), label(("cpu", "cuda")))
_X = np.array([0.0, 1.0, 2.0], np.float32)

#: jax.export checks a lowering for host callbacks and refuses it at export, before any
#: serialization (jax/_src/export/_export.py ``_check_lowering``); a callback lowered for a
#: platform whose backend this host lacks is refused by the lowering itself.
HOST_CALLBACKS = Limitation(
    "jax.export refuses host callbacks at export time: 'serialization of host_callbacks is not yet implemented'",
    platforms=ALL, stage="effects_export",
    error=r"serialization of host_callbacks is not yet implemented"
          r"|the platform for the specified backend \w+ is different from the lowering platform")
#: callback.py refuses to lower a python callback for more than one platform.
MULTI_PLATFORM_CALLBACK = Limitation(
    "jax refuses multi-platform lowering of python callbacks (io_callback, pure_callback)",
    platforms=MULTI, stage="effects_export", error=r"NotImplementedError: multi-platform lowering for python_callback",
    status="error")
#: The finding (docs/findings.md, "Effects"): lower_per_platform adds a list of tokens to
#: the tuple ``ctx.avals_out``; still at jax HEAD (Aug 2026), no upstream report found.
DEBUG_PRINT_MULTI = Limitation(
    "finding: jax.debug.print in a multi-platform export raises TypeError in mlir.lower_per_platform "
    "(a list of tokens + the tuple ctx.avals_out; docs/findings.md)",
    platforms=MULTI, stage="effects_export", error=r"TypeError: can only concatenate list \(not \"tuple\"\) to list",
    status="error", jax=">0.5.3")
#: jax 0.5.3 refuses the same export cleanly, as a python callback (a version sweep; the versions
#: between 0.5.3 and 0.9.2, which raise the TypeError, not measured).
DEBUG_PRINT_REFUSED = Limitation(
    "jax 0.5.3 refuses jax.debug.print in a multi-platform export as a python callback", platforms=MULTI,
    stage="effects_export", error=r"NotImplementedError: multi-platform lowering for python_callback",
    status="error", jax="<=0.5.3")
#: The ordinary export stage (the platforms whose lowering succeeded: cpu alone on a CPU
#: host) refuses the same callbacks.
STATIC_EXPORT = Limitation(
    "jax.export refuses host callbacks (single platform) and python callbacks for several platforms",
    stage="export", error=r"serialization of host_callbacks is not yet implemented"
                          r"|multi-platform lowering for python_callback|can only concatenate list",
    status="error")
#: lax.platform_dependent's module for cuda, rocm or tpu takes that platform's branch when
#: the CPU backend runs it (crossexec), by design: it differs from the cpu result.
OWN_BRANCH = Limitation(
    "platform_dependent: another platform's module takes its own branch on the CPU (by design; "
    "the effects_export stage checks which)", platforms=("cuda", "rocm", "tpu"), stage="crossexec",
    error=r"Mismatch", status="fail")


def _x() -> list[CustomArg]:
    return [CustomArg("effects_x:float32:3", lambda rng: _X.copy(), _X.shape, "float32")]


def _struct(x: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _tell(log: Log, tag: str, out: Callable[[np.ndarray], np.ndarray]) -> Callable[[Any], np.ndarray]:
    """A host callback that reports what it received and returns ``out`` of it."""
    def cb(v: Any) -> np.ndarray:
        log(tag, np.asarray(v))
        return np.asarray(out(np.asarray(v)), np.float32)
    return cb


def debug_print(log: Log) -> Callable[[Any], Any]:
    def fun(x: Any) -> Any:
        jax.debug.print("x={x} sum={s}", x=x, s=x.sum())
        return x * 2
    return fun


def io_ordered(log: Log) -> Callable[[Any], Any]:
    def fun(x: Any) -> Any:
        return io_callback(_tell(log, "io", lambda v: v * 2), _struct(x), x, ordered=True)
    return fun


def io_unordered(log: Log) -> Callable[[Any], Any]:
    def fun(x: Any) -> Any:
        return io_callback(_tell(log, "io", lambda v: v * 2), _struct(x), x, ordered=False)
    return fun


def pure(log: Log) -> Callable[[Any], Any]:
    def fun(x: Any) -> Any:
        return jax.pure_callback(_tell(log, "pure", lambda v: v + 1), _struct(x), x)
    return fun


def ordered_sequence(log: Log) -> Callable[[Any], Any]:
    """Three ordered callbacks with no data dependence between them: only the ordering
    tokens keep them in program order."""
    def fun(x: Any) -> Any:
        c = io_callback(_tell(log, "third", lambda v: v), _struct(x), x + 2, ordered=True)
        a = io_callback(_tell(log, "first", lambda v: v), _struct(x), x, ordered=True)
        b = io_callback(_tell(log, "second", lambda v: v), _struct(x), x + 1, ordered=True)
        return a + b + c
    return fun


def platform_branches(log: Log) -> Callable[[Any], Any]:
    def fun(x: Any) -> Any:
        return lax.platform_dependent(x, cpu=lambda v: v + 1, cuda=lambda v: v + 2, rocm=lambda v: v + 3,
                                      tpu=lambda v: v + 4)
    return fun


def _values(a: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in a)


def _define(primitive: str, build: Callable[[Log], Callable[..., Any]], reference: Callable[[np.ndarray], Any],
            effects: Effects, limitations: tuple[Limitation, ...], variant: str) -> None:
    define(FAMILY, primitive, build(discard), _x(), dtype="float32", group=GROUP, params={"variant": variant},
           reference=reference, effects=effects, limitations=limitations)


_CALLBACKS = (MULTI_PLATFORM_CALLBACK, HOST_CALLBACKS, STATIC_EXPORT)
_define("debug_print", debug_print, lambda x: x * 2,
        Effects(debug_print, printed=("x=[0. 1. 2.] sum=3.0",)),
        (DEBUG_PRINT_MULTI, DEBUG_PRINT_REFUSED, HOST_CALLBACKS, STATIC_EXPORT), "print")
_define("io_callback", io_ordered, lambda x: x * 2,
        Effects(io_ordered, calls=(("io", _values(_X)),)), _CALLBACKS, "ordered")
_define("io_callback", io_unordered, lambda x: x * 2,
        Effects(io_unordered, calls=(("io", _values(_X)),), ordered=False), _CALLBACKS, "unordered")
_define("pure_callback", pure, lambda x: x + 1,
        Effects(pure, calls=(("pure", _values(_X)),), ordered=False), _CALLBACKS, "pure")
_define("io_callback", ordered_sequence, lambda x: 3 * x + 3,
        Effects(ordered_sequence, calls=(("third", _values(_X + 2)), ("first", _values(_X)),
                                         ("second", _values(_X + 1)))), _CALLBACKS, "ordered_sequence")
_define("platform_dependent", platform_branches, lambda x: x + 1,
        Effects(platform_branches, branches={p: _values(_X + k) for k, p in enumerate(ALL, 1)}),
        (OWN_BRANCH,), "branches")
