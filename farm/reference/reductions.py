"""Reductions: reduce_* over axes, argmax/argmin, cumulative ops, generic ``reduce``,
window reductions (reduce_window*, select_and_scatter_add, select_and_gather_add),
sort and top_k.

Floats accumulate in float64 (complex128); integers in their own dtype (wrapping).
Ties in argmax/argmin/top_k go to the lowest index, as XLA's do; an unstable sort
gives the stable order, and its non-key outputs are checked by an invariant
(``farm.reference.invariants``): their order among tied keys is not unique.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from farm.reference.evaluator import AmbiguousResult, Ctx, UnsupportedPrimitive, register
from farm.reference.shapes import pad


def _lex_gt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a.real == b.real, a.imag > b.imag, a.real > b.real)


def _max2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(a):
        return np.where(_lex_gt(a, b), a, b)
    return np.logical_or(a, b) if a.dtype == np.bool_ else np.maximum(a, b)


def _min2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(a):
        return np.where(_lex_gt(b, a), a, b)
    return np.logical_and(a, b) if a.dtype == np.bool_ else np.minimum(a, b)


def _identity(dtype: np.dtype, kind: str) -> Any:
    """The value a reduction over no elements gives (lax's init value): max -inf, min +inf,
    and all ones, or and xor zero; for integers their extremes, for bool False/True."""
    if dtype == np.bool_:
        return kind in ("min", "and")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return {"max": info.min, "min": info.max, "and": ~dtype.type(0)}.get(kind, 0)
    return {"max": -np.inf, "min": np.inf}[kind]


def _fold(x: np.ndarray, axes: tuple[int, ...], op: Any, kind: str = "") -> np.ndarray:
    """Reduce ``axes`` of ``x`` with a binary ``op``, one slice at a time (in index order);
    over no elements (a zero-sized reduced axis) the ``kind``'s identity."""
    if not axes:
        return x.copy()
    rest = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(x.shape[d] for d in rest)
    n = int(np.prod([x.shape[a] for a in axes]))
    if n == 0:
        return np.full(out_shape, _identity(x.dtype, kind), dtype=x.dtype)
    moved = np.transpose(x, list(axes) + rest).reshape((n,) + out_shape)
    acc = moved[0]
    for i in range(1, moved.shape[0]):
        acc = op(acc, moved[i])
    return acc


@register("reduce_sum")
def _reduce_sum(ctx: Ctx, x: np.ndarray, *, axes: tuple[int, ...], **_: Any) -> np.ndarray:
    return np.sum(x, axis=tuple(axes), dtype=x.dtype)


@register("reduce_prod")
def _reduce_prod(ctx: Ctx, x: np.ndarray, *, axes: tuple[int, ...], **_: Any) -> np.ndarray:
    return np.prod(x, axis=tuple(axes), dtype=x.dtype)


@register("reduce_max")
def _reduce_max(ctx: Ctx, x: np.ndarray, *, axes: tuple[int, ...], **_: Any) -> np.ndarray:
    return _fold(x, tuple(axes), _max2, "max")


@register("reduce_min")
def _reduce_min(ctx: Ctx, x: np.ndarray, *, axes: tuple[int, ...], **_: Any) -> np.ndarray:
    return _fold(x, tuple(axes), _min2, "min")


def _logical(name: str, logical: Any, bitwise: Any) -> None:
    register(name)(lambda ctx, x, *, axes, _l=logical, _b=bitwise, **_: _fold(
        x, tuple(axes), _l if x.dtype == np.bool_ else _b, name.removeprefix("reduce_")))


_logical("reduce_and", np.logical_and, np.bitwise_and)
_logical("reduce_or", np.logical_or, np.bitwise_or)
_logical("reduce_xor", np.logical_xor, np.bitwise_xor)


def _arg(ctx: Ctx, x: np.ndarray, axes: tuple[int, ...], index_dtype: Any, is_max: bool) -> np.ndarray:
    (axis,) = axes
    if np.iscomplexobj(x):
        raise UnsupportedPrimitive(f"{ctx.primitive}[complex]")
    moved = np.moveaxis(x, axis, -1)
    if x.dtype == np.bool_:
        moved = moved.astype(np.int8)
    # np.argmax/argmin return the first NaN if there is one, else the first extremum: XLA's rule
    out = np.argmax(moved, axis=-1) if is_max else np.argmin(moved, axis=-1)
    return out.astype(index_dtype)


register("argmax")(lambda ctx, x, *, axes, index_dtype, **_: _arg(ctx, x, axes, index_dtype, True))
register("argmin")(lambda ctx, x, *, axes, index_dtype, **_: _arg(ctx, x, axes, index_dtype, False))


def _cumulative(name: str, op: Any) -> None:
    def rule(ctx: Ctx, x: np.ndarray, *, axis: int, reverse: bool, **_: Any) -> np.ndarray:
        y = np.flip(x, axis) if reverse else x
        if y.dtype == np.bool_ and name in ("cumsum", "cumprod"):
            y = y.astype(np.int8)
        out = op(y, axis=axis, dtype=y.dtype) if name in ("cumsum", "cumprod") else op(y, axis=axis)
        return np.flip(out, axis) if reverse else out
    register(name)(rule)


_cumulative("cumsum", np.cumsum)
_cumulative("cumprod", np.cumprod)
def _accumulate(op: Any) -> Any:
    """A running ``op`` along ``axis`` (for ops that are not ufuncs: lexicographic complex max...)."""
    def acc(y: np.ndarray, axis: int) -> np.ndarray:
        out = np.moveaxis(y, axis, 0).copy()
        for i in range(1, out.shape[0]):
            out[i] = op(out[i - 1], out[i])
        return np.moveaxis(out, 0, axis)
    return acc


_cumulative("cummax", _accumulate(_max2))
_cumulative("cummin", _accumulate(_min2))
_cumulative("cumlogsumexp", lambda y, axis: np.logaddexp.accumulate(y, axis=axis))


@register("reduce")
def _reduce(ctx: Ctx, *args: np.ndarray, computation: Any = None, jaxpr: Any, dimensions: tuple[int, ...],
            **_: Any) -> list[np.ndarray]:
    n = len(args) // 2
    operands, inits = args[:n], args[n:]
    axes = tuple(dimensions)
    rest = [d for d in range(operands[0].ndim) if d not in axes]
    out_shape = tuple(operands[0].shape[d] for d in rest)
    flat = [np.transpose(o, rest + list(axes)).reshape(out_shape + (-1,)) for o in operands]
    outs = [np.empty(out_shape, dtype=i.dtype) for i in inits]
    for pos in np.ndindex(*out_shape):
        acc = [np.asarray(i) for i in inits]
        for k in range(flat[0].shape[-1]):
            acc = ctx.call(jaxpr, *acc, *(f[pos + (k,)] for f in flat))
        for o, a in zip(outs, acc):
            o[pos] = a
    return outs


# ---------------------------------------------------------------- windows
def _windows(x: np.ndarray, init: Any, window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
             padding: Any, base_dilation: Any = None, window_dilation: Any = None) -> tuple[list[np.ndarray], Any]:
    """The operand padded with ``init``, and for each window offset the strided view of
    the elements at that offset in every window (so window reductions fold over views)."""
    nd = x.ndim
    base_dilation = base_dilation or (1,) * nd
    window_dilation = window_dilation or (1,) * nd
    xp = pad(x, np.asarray(init, dtype=x.dtype), [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)])
    eff = [(w - 1) * d + 1 for w, d in zip(window_dimensions, window_dilation)]
    out_shape = tuple(max(0, (n - e) // s + 1) for n, e, s in zip(xp.shape, eff, window_strides))
    views = []
    for k in itertools.product(*(range(w) for w in window_dimensions)):
        sl = tuple(slice(ki * d, ki * d + (o - 1) * s + 1, s) if o else slice(0, 0)
                   for ki, d, o, s in zip(k, window_dilation, out_shape, window_strides))
        views.append(xp[sl])
    return views, out_shape


def _window_reduce(name: str, op: Any, init_of: Any) -> None:
    def rule(ctx: Ctx, x: np.ndarray, *, window_dimensions: Any, window_strides: Any, padding: Any,
             base_dilation: Any = None, window_dilation: Any = None, **_: Any) -> np.ndarray:
        views, _ = _windows(x, init_of(x.dtype), window_dimensions, window_strides, padding,
                            base_dilation, window_dilation)
        acc = views[0].copy()
        for v in views[1:]:
            acc = op(acc, v)
        return acc
    register(name)(rule)


def _lowest(dt: np.dtype) -> Any:
    if dt == np.bool_:
        return False
    return np.iinfo(dt).min if np.issubdtype(dt, np.integer) else -np.inf


def _highest(dt: np.dtype) -> Any:
    if dt == np.bool_:
        return True
    return np.iinfo(dt).max if np.issubdtype(dt, np.integer) else np.inf


_window_reduce("reduce_window_sum", np.add, lambda dt: 0)
_window_reduce("reduce_window_max", _max2, _lowest)
_window_reduce("reduce_window_min", _min2, _highest)


@register("reduce_window")
def _reduce_window(ctx: Ctx, *args: np.ndarray, jaxpr: Any, consts: Any = (), window_dimensions: Any,
                   window_strides: Any, padding: Any, base_dilation: Any = None, window_dilation: Any = None,
                   **_: Any) -> list[np.ndarray]:
    n = len(args) // 2
    operands, inits = args[:n], args[n:]
    if _fills(padding, base_dilation) and not _is_identity(ctx, jaxpr, consts, operands, inits):
        # XLA's semantics need the init value to be the reduction's identity; where it is not,
        # how often it enters a padded window is implementation-defined (HLO ReduceWindow)
        raise AmbiguousResult("reduce_window with padding and an init value that is not the reduction's identity: "
                              "implementation-defined")
    per = [_windows(o, i, window_dimensions, window_strides, padding, base_dilation, window_dilation)
           for o, i in zip(operands, inits)]
    out_shape = per[0][1]
    outs = [np.empty(out_shape, dtype=i.dtype) for i in inits]
    for pos in np.ndindex(*out_shape):
        acc = [np.asarray(i) for i in inits]
        for k in range(len(per[0][0])):
            acc = ctx.call(jaxpr, *acc, *(views[k][pos] for views, _ in per), consts=consts)
        for o, a in zip(outs, acc):
            o[pos] = a
    return outs


def _fills(padding: Any, base_dilation: Any) -> bool:
    """Whether the windows see elements that are not the operand's (padding, base dilation)."""
    return any(lo > 0 or hi > 0 for lo, hi in padding) or any(b > 1 for b in (base_dilation or ()))


def _is_identity(ctx: Ctx, jaxpr: Any, consts: Any, operands: tuple[np.ndarray, ...], inits: tuple[np.ndarray, ...]) -> bool:
    """Whether the init values leave a few of the operands' own elements unchanged, from the left
    and from the right: the reduction's identity on them."""
    flat = [np.asarray(o).reshape(-1) for o in operands]
    for j in range(min(4, flat[0].size)):
        xs = [f[j] for f in flat]
        for res in (ctx.call(jaxpr, *inits, *xs, consts=consts), ctx.call(jaxpr, *xs, *inits, consts=consts)):
            if not all(np.array_equal(np.asarray(r), np.asarray(x), equal_nan=True) for r, x in zip(res, xs)):
                return False
    return True


def _selected(operand: np.ndarray, select_prim: Any, window_dimensions: Any, window_strides: Any,
              padding: Any, base_dilation: Any = None, window_dilation: Any = None) -> tuple[Any, tuple]:
    """For each window, the flat index (into the padded operand) of the element the window
    selects: the first one for which ``select(current, candidate)`` keeps the current one."""
    name = getattr(select_prim, "name", str(select_prim))
    if name not in ("ge", "gt", "le", "lt"):
        raise UnsupportedPrimitive(f"select_prim {name}")
    keep = {"ge": np.greater_equal, "gt": np.greater, "le": np.less_equal, "lt": np.less}[name]
    init = -np.inf if name in ("ge", "gt") else np.inf
    if np.issubdtype(operand.dtype, np.integer):
        init = _lowest(operand.dtype) if name in ("ge", "gt") else _highest(operand.dtype)
    positions = np.arange(operand.size).reshape(operand.shape)
    vals, out_shape = _windows(operand, init, window_dimensions, window_strides, padding,
                               base_dilation, window_dilation)
    idxs, _ = _windows(positions, -1, window_dimensions, window_strides, padding, base_dilation, window_dilation)
    best_v, best_i = vals[0].copy(), idxs[0].copy()
    for v, i in zip(vals[1:], idxs[1:]):
        take = (i >= 0) & ((best_i < 0) | ~keep(best_v, v))  # padding is never selected
        best_v, best_i = np.where(take, v, best_v), np.where(take, i, best_i)
    return best_i, out_shape


@register("select_and_scatter_add")
def _select_and_scatter_add(ctx: Ctx, source: np.ndarray, operand: np.ndarray, *, select_prim: Any,
                            window_dimensions: Any, window_strides: Any, padding: Any, **_: Any) -> np.ndarray:
    best, _ = _selected(operand, select_prim, window_dimensions, window_strides, padding)
    out = np.zeros(operand.size, dtype=source.dtype)
    for i, s in zip(best.ravel(), source.ravel()):
        if i >= 0:  # a window entirely in padding selects nothing
            out[i] += s
    return out.reshape(operand.shape)


@register("select_and_gather_add")
def _select_and_gather_add(ctx: Ctx, tangents: np.ndarray, operand: np.ndarray, *, select_prim: Any,
                           window_dimensions: Any, window_strides: Any, padding: Any, base_dilation: Any,
                           window_dilation: Any, **_: Any) -> np.ndarray:
    best, _ = _selected(operand, select_prim, window_dimensions, window_strides, padding,
                        base_dilation, window_dilation)
    flat = tangents.ravel()
    return np.where(best >= 0, flat[np.maximum(best, 0)], 0).astype(tangents.dtype)


# ---------------------------------------------------------------- sorting
def _sort_keys(x: np.ndarray) -> list[np.ndarray]:
    """Lexsort keys, most significant last; -0.0 == 0.0 and NaNs last, as JAX's comparator."""
    if np.iscomplexobj(x):
        return [x.imag + 0.0, x.real + 0.0]
    return [x + 0 if x.dtype != np.bool_ else x.astype(np.int8)]


@register("sort")
def _sort(ctx: Ctx, *ops: np.ndarray, dimension: int, is_stable: bool, num_keys: int, **_: Any) -> list[np.ndarray]:
    moved = [np.moveaxis(o, dimension, -1) for o in ops]
    keys: list[np.ndarray] = []
    for k in reversed(moved[:num_keys]):
        keys.extend(_sort_keys(k))
    order = np.lexsort(keys, axis=-1) if keys[0].ndim else np.zeros((), int)
    outs = [np.take_along_axis(m, order, axis=-1) for m in moved]
    return [np.moveaxis(o, -1, dimension) for o in outs]


def _total_order(x: np.ndarray) -> np.ndarray:
    """IEEE total order as int64 keys: -NaN < -Inf < ... < -0.0 < +0.0 < ... < +Inf < +NaN."""
    b = np.asarray(x, dtype=np.float64).view(np.int64)
    return np.where(b < 0, b ^ np.int64(0x7FFFFFFFFFFFFFFF), b)


@register("top_k")
def _top_k(ctx: Ctx, x: np.ndarray, *, k: int, axis: int = -1, **_: Any) -> list[np.ndarray]:
    """The k largest in XLA's total order (unlike ``sort``, a -NaN is the smallest and
    -0.0 < +0.0); ties go to the lowest index."""
    if np.iscomplexobj(x):
        raise UnsupportedPrimitive("top_k[complex]")
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    flipped = np.flip(moved, -1)
    keys = [_total_order(flipped) if flipped.dtype.kind == "f" else flipped]
    order = n - 1 - np.flip(np.lexsort(keys, axis=-1), -1)  # descending; ties: lowest index first
    idx = order[..., :k]
    vals = np.take_along_axis(moved, idx, axis=-1)
    return [np.moveaxis(vals, -1, axis), np.moveaxis(idx.astype(np.int32), -1, axis)]


@register("approx_top_k")
def _approx_top_k(ctx: Ctx, x: np.ndarray, *, k: int, reduction_dimension: int = -1, is_max_k: bool = True,
                  **_: Any) -> list[np.ndarray]:
    """The exact top (or bottom) k: what an approximate top-k should find (its recall is
    checked by ``farm.reference.invariants``, since which near-ties it returns is not unique)."""
    vals, idx = _top_k(ctx, x if is_max_k else -x, k=k, axis=reduction_dimension)
    return [vals if is_max_k else -vals, idx]
