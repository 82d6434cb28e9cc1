"""Rules for primitives that carry sub-jaxprs: calls, custom derivatives, cond, while, scan.

Each evaluates the primal computation only (custom JVP/VJP rules are ignored: a
reference evaluates the function, not its derivative).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.reference.evaluator import AmbiguousResult, Ctx, register

#: Where the reference gives up on a while loop (a few seconds; above the 2,000 iterations jax's
#: igamma series and continued fractions may take): past it, the reference has no answer
#: rather than hanging the worker until the harness times out.
MAX_WHILE_ITERATIONS = 5_000


@register("jit", "pjit", "closed_call", "core_call", "remat", "remat2", "checkpoint", "custom_jvp_call",
          "custom_vjp_call", "custom_vjp_call_jaxpr")
def _call(ctx: Ctx, *args: Any, **params: Any) -> list[np.ndarray]:
    sub = params.get("jaxpr", params.get("call_jaxpr", params.get("fun_jaxpr")))
    if sub is None:
        raise TypeError(f"{ctx.primitive}: no sub-jaxpr among params {sorted(params)}")
    return ctx.call(sub, *args)


@register("cond")
def _cond(ctx: Ctx, index: np.ndarray, *ops: Any, branches: Any, **_: Any) -> list[np.ndarray]:
    i = int(np.clip(int(index), 0, len(branches) - 1))  # an out-of-range index is clamped
    return ctx.call(branches[i], *ops)


@register("while")
def _while(ctx: Ctx, *args: Any, cond_jaxpr: Any, body_jaxpr: Any, cond_nconsts: int,
           body_nconsts: int, **_: Any) -> list[np.ndarray]:
    cconsts, bconsts = args[:cond_nconsts], args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = list(args[cond_nconsts + body_nconsts:])
    for _ in range(MAX_WHILE_ITERATIONS):
        pred = ctx.call(cond_jaxpr, *cconsts, *carry)[0]
        if not pred.any():
            return carry
        new = ctx.call(body_jaxpr, *bconsts, *carry)
        if pred.ndim != 0:  # a batched predicate (from vmap): only the lanes still looping advance, as XLA lowers it
            new = [np.where(pred.reshape(pred.shape + (1,) * (n.ndim - pred.ndim)), n, c)
                   for n, c in zip(new, carry)]
        if all(np.array_equal(n, c, equal_nan=True) for n, c in zip(new, carry)):
            # the condition reads only the carry and constants: the same carry loops forever
            raise AmbiguousResult("a while loop of the reference stopped changing its carry with its condition "
                                  "still true: it would never end")
        carry = new
    # the device's loop ended (it returned), the reference's did not: its condition hangs on values
    # the reference computes otherwise (a rejection sampler fed implementation-defined random bits)
    raise AmbiguousResult(f"a while loop of the reference did not end within {MAX_WHILE_ITERATIONS:,} iterations")


@register("scan")
def _scan(ctx: Ctx, *args: Any, jaxpr: Any, length: int, reverse: bool, num_consts: int | None = None,
          num_carry: int | None = None, ft_in: Any = None, **_: Any) -> list[np.ndarray]:
    if num_consts is None:  # jax 0.12: the operands' structure, a FlatTree of (consts, carry, xs)
        parts = ft_in.unpack() if hasattr(ft_in, "unpack") else None
        if parts is None or len(parts) != 3 or not all(hasattr(t, "vals") for t in parts):
            raise NotImplementedError(f"a scan whose operands' structure is ft_in={ft_in!r} is not read yet")
        num_consts, num_carry = (len(list(t.vals)) for t in parts[:2])
    consts, carry = args[:num_consts], list(args[num_consts:num_consts + num_carry])
    xs = args[num_consts + num_carry:]
    ys_avals = ctx.out_avals[num_carry:]
    ys = [None] * len(ys_avals)
    steps = range(length - 1, -1, -1) if reverse else range(length)
    for t in steps:
        out = ctx.call(jaxpr, *consts, *carry, *(x[t] for x in xs))
        carry, y = out[:num_carry], out[num_carry:]
        for k, v in enumerate(y):
            if ys[k] is None:
                ys[k] = np.zeros((length,) + v.shape, dtype=v.dtype)
            ys[k][t] = v
    for k, a in enumerate(ys_avals):
        if ys[k] is None:  # length 0
            ys[k] = np.zeros(a.shape, dtype=np.float64)
    return carry + ys


@register("custom_linear_solve")
def _linear_solve(ctx: Ctx, *args: Any, const_lengths: Any, jaxprs: Any, **_: Any) -> list[np.ndarray]:
    n_mv, n_vm, n_s = const_lengths.matvec, const_lengths.vecmat, const_lengths.solve
    n_all = n_mv + n_vm + n_s + const_lengths.transpose_solve
    solve_consts = args[n_mv + n_vm:n_mv + n_vm + n_s]
    return ctx.call(jaxprs.solve, *solve_consts, *args[n_all:])


@register("device_put", "optimization_barrier")
def _identity_many(ctx: Ctx, *args: Any, **_: Any) -> list[np.ndarray]:
    return list(args)


@register("copy", "copy_p", "stop_gradient")
def _identity(ctx: Ctx, x: np.ndarray, **_: Any) -> np.ndarray:
    return x.copy()
