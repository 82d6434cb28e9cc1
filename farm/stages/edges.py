"""The ``edge_values`` stage: a harness's traced function run on the CPU with its operands at
their dtype's edge values (``farm.catalog.special.values``: NaN, ±inf, ±0, the smallest
subnormal and normal, the largest finite, the integer extremes and the values where
arithmetic wraps): each operand on its own, the others as drawn, then all of them together.
One record per variant (its platform names it: ``arg0``, ``arg1``..., ``all``), carrying the
arguments and what came back; the verdict is ``farm.judge.edges``'s.

Random inputs almost never hit these, and they are where lowering rules differ: NaN through
max, min and reductions, the sign of a zero, overflow, a conversion of NaN, division by zero,
``MIN / -1``, shifts by the bit width.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.catalog import special
from farm.catalog.dtypes import DTYPES
from farm.results import Record
from farm.stages.record import Timer, failure

#: Operand dtypes that have edge values (bool's are its two values: no edge).
EDGED = frozenset(d for d in DTYPES if d != "bool")


def edged(x: Any) -> bool:
    """Whether an operand takes edge values: a non-empty array of a dtype that has them."""
    a = np.asarray(x)
    return a.size > 0 and a.dtype.name in EDGED and a.dtype.kind in "fiuV"


def filled(x: Any, phase: int = 0) -> np.ndarray:
    """``x``'s shape filled with its dtype's edge values, cycled (starting ``phase`` along: two
    operands filled together meet in other combinations)."""
    a = np.asarray(x)
    v = special.values(a.dtype.name)
    return np.resize(np.roll(v, -phase), a.shape).astype(a.dtype)


def variants(dyn: list[Any]) -> list[tuple[str, list[Any]]]:
    """(label, arguments): each edged operand on its own (``arg<i>``), then every one together
    (``all``, where there are two or more). An operand with fewer elements than its dtype has
    edge values takes them in turns (``arg0@12``: from the 13th on), so every value is met."""
    idx = [i for i, x in enumerate(dyn) if edged(x)]
    out = []
    for i in idx:
        for phase in _phases(dyn[i]):
            out.append((f"arg{i}" + (f"@{phase}" if phase else ""), [filled(x, phase) if j == i else x
                                                                      for j, x in enumerate(dyn)]))
    if len(idx) > 1:
        turns = max(len(_phases(dyn[i])) for i in idx)
        step = min(np.size(dyn[i]) for i in idx)
        for t in range(turns):
            out.append(("all" + (f"@{t * step}" if t else ""),
                        [filled(x, t * step + 3 * j) if j in idx else x for j, x in enumerate(dyn)]))
    return out


def _phases(x: Any) -> range:
    """Where each turn of an operand's edge values starts (one turn where it holds them all)."""
    return range(0, special.values(np.asarray(x).dtype.name).size, np.size(x))


def restored(args: list[Any], drawn: list[Any], wheres: list[Any]) -> tuple[list[Any], int]:
    """``args`` with the elements any of ``wheres`` covers (a predicate over the operands as
    float64, broadcast together) put back to the drawn values, and how many were covered. An
    operand broadcast along an axis is put back wherever any element it feeds is covered
    (putting back only ever takes edge values out, never adds any)."""
    if not wheres:
        return args, 0
    arrays = [np.asarray(a) for a in args]
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:  # operands that do not broadcast (a matrix and its indices): nothing covered
        return args, 0
    wide = [a.astype(np.float64) if a.dtype.kind in "fiu" or a.dtype.name == "bfloat16" else a for a in arrays]
    with np.errstate(all="ignore"):
        mask = np.zeros(shape, bool)
        for where in wheres:
            mask |= np.broadcast_to(np.asarray(where(*wide), bool), shape)
    if not mask.any():
        return args, 0
    out = []
    for a, d in zip(arrays, drawn):
        lead = len(shape) - a.ndim
        own = mask.any(axis=tuple(range(lead))) if lead else mask  # the axes the broadcast put in front
        if a.ndim:  # and those it stretched from 1
            own = own.any(axis=tuple(i for i, n in enumerate(a.shape) if n == 1 and own.shape[i] != 1), keepdims=True)
        out.append(np.where(own, np.asarray(d), a).astype(a.dtype))
    return out, int(mask.sum())


def compiled(jitted: Any, dyn: list[Any]) -> Any:
    """The function compiled as a user's call compiles it (not the farm's quicker checking
    options: XLA's optimizer is part of what edge values test), once for every variant."""
    return jitted.lower(*dyn).compile()


def run(executable: Any, label: str, args: list[Any]) -> Record:
    """The compiled function on these arguments: ``ok`` with ``handle`` (arguments, outputs),
    or the error it raised."""
    import jax

    timer = Timer()
    try:
        with timer(), np.errstate(all="ignore"):
            outs = [np.asarray(o) for o in jax.tree.leaves(executable(*args))]
    except Exception as e:  # noqa: BLE001  the judge says whether it is news
        return failure(Record, "edge_values", label, e, timer.seconds)
    return Record("edge_values", label, "ok", timer.seconds, facts={"operands": label}, handle=(args, outs))


__all__ = ["EDGED", "compiled", "restored", "edged", "filled", "run", "variants"]
