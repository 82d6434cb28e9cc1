"""Rules that move elements without arithmetic: broadcast, reshape, transpose, slicing,
padding, concatenation, iota, gather and the scatter family.

Gather and scatter follow XLA's semantics with JAX's out-of-bounds modes:
``CLIP`` clamps the start of each window so the window fits; ``FILL_OR_DROP`` fills
a gathered window (drops a scattered one) that does not fit; ``PROMISE_IN_BOUNDS``
clamps gathers and drops scatters, as XLA does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.reference.evaluator import AmbiguousResult, Ctx, physical_shape, ref_dtype, register


def _with_trailing(perm: Any, ndim: int) -> tuple[int, ...]:
    """A permutation of the logical dims, extended over a key array's trailing key-data dims."""
    perm = tuple(perm)
    return perm + tuple(range(len(perm), ndim))


@register("broadcast_in_dim")
def _broadcast_in_dim(ctx: Ctx, x: np.ndarray, *dyn: Any, shape: tuple[int, ...],
                      broadcast_dimensions: tuple[int, ...], **_: Any) -> np.ndarray:
    n_key = len(physical_shape(ctx.in_avals[0])) - len(ctx.in_avals[0].shape)  # key arrays: key-data dims
    trailing = x.shape[x.ndim - n_key:] if n_key else ()
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    return np.broadcast_to(x.reshape(tuple(expanded) + trailing), tuple(shape) + trailing).copy()


@register("reshape")
def _reshape(ctx: Ctx, x: np.ndarray, *dyn: Any, new_sizes: tuple[int, ...], dimensions: Any = None,
             **_: Any) -> np.ndarray:
    if dimensions is not None:
        x = np.transpose(x, _with_trailing(dimensions, x.ndim))
    return x.reshape(physical_shape(ctx.out_avals[0]))  # key arrays keep their key-data dims


@register("transpose")
def _transpose(ctx: Ctx, x: np.ndarray, *, permutation: tuple[int, ...], **_: Any) -> np.ndarray:
    return np.transpose(x, _with_trailing(permutation, x.ndim)).copy()


@register("squeeze")
def _squeeze(ctx: Ctx, x: np.ndarray, *, dimensions: tuple[int, ...], **_: Any) -> np.ndarray:
    return np.squeeze(x, axis=tuple(dimensions))


@register("expand_dims")
def _expand_dims(ctx: Ctx, x: np.ndarray, *, dimensions: tuple[int, ...], **_: Any) -> np.ndarray:
    return np.expand_dims(x, dimensions)


@register("concatenate")
def _concatenate(ctx: Ctx, *xs: np.ndarray, dimension: int, **_: Any) -> np.ndarray:
    return np.concatenate(xs, axis=dimension)


@register("split")
def _split(ctx: Ctx, x: np.ndarray, *, sizes: tuple[int, ...], axis: int, **_: Any) -> list[np.ndarray]:
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


@register("rev")
def _rev(ctx: Ctx, x: np.ndarray, *, dimensions: tuple[int, ...], **_: Any) -> np.ndarray:
    return np.flip(x, dimensions).copy() if dimensions else x.copy()


@register("iota")
def _iota(ctx: Ctx, *dyn: Any, dtype: Any, shape: tuple[int, ...], dimension: int, **_: Any) -> np.ndarray:
    idx = np.arange(shape[dimension]).reshape([-1 if d == dimension else 1 for d in range(len(shape))])
    return np.broadcast_to(idx, shape).astype(ref_dtype(dtype))


@register("pad")
def _pad(ctx: Ctx, x: np.ndarray, value: np.ndarray, *, padding_config: Any, **_: Any) -> np.ndarray:
    return pad(x, value, padding_config)


def pad(x: np.ndarray, value: Any, config: Any) -> np.ndarray:
    """``lax.pad``: interior padding first, then low/high edges (negative ones crop)."""
    out = x
    for axis, (lo, hi, interior) in enumerate(config):
        n = out.shape[axis]
        if interior > 0 and n > 0:
            shape = list(out.shape)
            shape[axis] = n + (n - 1) * interior
            dil = np.full(shape, value, dtype=out.dtype)
            sl = [slice(None)] * out.ndim
            sl[axis] = slice(None, None, interior + 1)
            dil[tuple(sl)] = out
            out = dil
        # edges added before any is cropped: a negative edge may crop into the other edge's
        # padding (an empty axis padded by (-1, 1) stays empty)
        for amount, at_end in ((lo, False), (hi, True)):
            if amount > 0:
                shape = list(out.shape)
                shape[axis] = amount
                block = np.full(shape, value, dtype=out.dtype)
                out = np.concatenate([out, block] if at_end else [block, out], axis=axis)
        for amount, at_end in ((lo, False), (hi, True)):
            n = out.shape[axis]
            if amount < 0:
                sl = [slice(None)] * out.ndim
                sl[axis] = slice(0, n + amount) if at_end else slice(-amount, n)
                out = out[tuple(sl)]
    return out


@register("slice")
def _slice(ctx: Ctx, x: np.ndarray, *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...],
           strides: Any = None, **_: Any) -> np.ndarray:
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, e, st) for s, e, st in zip(start_indices, limit_indices, strides))].copy()


def _clamped_starts(starts: Any, shape: tuple[int, ...], sizes: tuple[int, ...]) -> list[int]:
    return [int(np.clip(int(s), 0, d - k)) for s, d, k in zip(starts, shape, sizes)]


@register("dynamic_slice")
def _dynamic_slice(ctx: Ctx, x: np.ndarray, *starts: np.ndarray, slice_sizes: tuple[int, ...],
                   **_: Any) -> np.ndarray:
    st = _clamped_starts(starts[:x.ndim], x.shape, slice_sizes)
    return x[tuple(slice(s, s + k) for s, k in zip(st, slice_sizes))].copy()


@register("dynamic_update_slice")
def _dynamic_update_slice(ctx: Ctx, x: np.ndarray, update: np.ndarray, *starts: np.ndarray,
                          **_: Any) -> np.ndarray:
    st = _clamped_starts(starts, x.shape, update.shape)
    out = x.copy()
    out[tuple(slice(s, s + k) for s, k in zip(st, update.shape))] = update
    return out


# ------------------------------------------------------------------ gather / scatter
def _mode_name(mode: Any) -> str:
    return getattr(mode, "name", str(mode)).split(".")[-1]


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Indices with the index vector moved last: (batch..., k), and the batch shape."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    else:
        indices = np.moveaxis(indices, index_vector_dim, -1)
    return indices.astype(np.int64), indices.shape[:-1]


def _batch_pos(dim: int, index_vector_dim: int) -> int:
    """Position of indices dimension ``dim`` among the batch dims (index vector dim removed)."""
    return dim if dim < index_vector_dim else dim - 1


@register("gather")
def _gather(ctx: Ctx, operand: np.ndarray, indices: np.ndarray, *, dimension_numbers: Any,
            slice_sizes: tuple[int, ...], mode: Any, fill_value: Any = None, **_: Any) -> np.ndarray:
    dn = dimension_numbers
    ivd = indices.ndim - 1  # JAX always puts the index vector last
    idx, batch_shape = _index_vectors(indices, ivd)
    fill = _fill_value(fill_value, np.dtype(ctx.out_avals[0].dtype))
    drop_dims = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_shape = tuple(s for d, s in enumerate(slice_sizes) if d not in drop_dims)
    tmp = np.empty(batch_shape + window_shape, dtype=operand.dtype)
    fill_or_drop = _mode_name(mode) == "FILL_OR_DROP"
    for b in np.ndindex(*batch_shape):
        start = [0] * operand.ndim
        for k, od in enumerate(dn.start_index_map):
            start[od] = int(idx[b + (k,)])
        for od, idim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            start[od] = b[_batch_pos(idim, ivd)]
        fits = all(0 <= start[d] <= operand.shape[d] - slice_sizes[d] for d in dn.start_index_map)
        if fill_or_drop and not fits:
            tmp[b] = fill
            continue
        start = _clamped_starts(start, operand.shape, slice_sizes)
        window = operand[tuple(slice(s, s + k) for s, k in zip(start, slice_sizes))]
        tmp[b] = window.reshape(window_shape)
    nb = len(batch_shape)
    out_rank = nb + len(window_shape)
    perm, bi = [], 0
    for d in range(out_rank):
        if d in dn.offset_dims:
            perm.append(nb + list(dn.offset_dims).index(d))
        else:
            perm.append(bi)
            bi += 1
    return np.transpose(tmp, perm).copy()


def _fill_value(fill_value: Any, dtype: np.dtype) -> Any:
    if fill_value is not None:
        return fill_value
    if dtype == np.bool_:
        return True
    if np.issubdtype(dtype, np.signedinteger):
        return np.iinfo(dtype).min
    if np.issubdtype(dtype, np.unsignedinteger):
        return np.iinfo(dtype).max
    return np.nan


_COMBINE = {
    "scatter-add": np.add,
    "scatter_add": np.add,
    "scatter-sub": np.subtract,
    "scatter_sub": np.subtract,
    "scatter-mul": np.multiply,
    "scatter_mul": np.multiply,
    "scatter-min": None,  # set below: NaN-propagating, lexicographic for complex
    "scatter_min": None,
    "scatter-max": None,
    "scatter_max": None,
    "scatter": None,
}


def _minmax(is_max: bool) -> Any:
    def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if np.iscomplexobj(a):  # lexicographic, as XLA compares complex numbers
            op = np.greater if is_max else np.less
            return np.where(np.where(a.real == b.real, op(a.imag, b.imag), op(a.real, b.real)), a, b)
        if a.dtype == np.bool_:
            return np.logical_or(a, b) if is_max else np.logical_and(a, b)
        return np.maximum(a, b) if is_max else np.minimum(a, b)  # NaN propagates
    return combine


@register(*_COMBINE)
def _scatter(ctx: Ctx, operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
             dimension_numbers: Any, mode: Any, update_jaxpr: Any = None, update_consts: Any = (),
             **_: Any) -> np.ndarray:
    name = ctx.primitive
    if name in ("scatter-min", "scatter_min", "scatter-max", "scatter_max"):
        combine = _minmax("max" in name)
    elif name == "scatter" and update_jaxpr is not None:  # scatter_apply: the combiner is a jaxpr
        combine = _elementwise_jaxpr(ctx, update_jaxpr, update_consts)
    elif name == "scatter":
        combine = None  # replace
    else:
        combine = _COMBINE[name]
    dn = dimension_numbers
    ivd = indices.ndim - 1
    idx, scatter_shape = _index_vectors(indices, ivd)
    window_dims = list(dn.update_window_dims)
    scatter_dims = [d for d in range(updates.ndim) if d not in window_dims]
    upd = np.transpose(updates, scatter_dims + window_dims)
    inserted = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    full_window, wi = [], 0
    for d in range(operand.ndim):
        if d in inserted:
            full_window.append(1)
        else:
            full_window.append(updates.shape[window_dims[wi]])
            wi += 1
    clip = _mode_name(mode) == "CLIP"
    out = operand.copy()
    written = np.zeros(operand.shape, dtype=bool) if combine is None else None
    for g in np.ndindex(*scatter_shape):
        start = [0] * operand.ndim
        for k, od in enumerate(dn.scatter_dims_to_operand_dims):
            start[od] = int(idx[g + (k,)])
        for od, idim in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
            start[od] = g[_batch_pos(idim, ivd)]
        if clip:
            start = _clamped_starts(start, operand.shape, full_window)
        elif not all(0 <= s <= n - w for s, n, w in zip(start, operand.shape, full_window)):
            continue  # the whole window is dropped
        region = tuple(slice(s, s + w) for s, w in zip(start, full_window))
        w = upd[g].reshape(full_window)
        if combine is None:
            seen = written[region]
            if np.any(seen & ~_same(out[region], w)):
                raise AmbiguousResult("scatter writes two different values to one element "
                                      "(the result depends on the order of updates)")
            out[region] = w
            written[region] = True
        else:
            out[region] = combine(out[region], w)
    return out


def _elementwise_jaxpr(ctx: Ctx, jaxpr: Any, consts: Any) -> Any:
    """A scalar combiner jaxpr ``(old, update) -> new`` applied element by element."""
    def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.empty(a.shape, dtype=a.dtype)
        for i in np.ndindex(*a.shape):
            out[i] = ctx.call(jaxpr, a[i], b[i], consts=list(consts))[0]
        return out
    return combine


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | ((a != a) & (b != b))


@register("stack")
def _stack(ctx: Ctx, *xs: np.ndarray, axis: int, **_: Any) -> np.ndarray:
    return np.stack(xs, axis=axis)


@register("unstack")
def _unstack(ctx: Ctx, x: np.ndarray, *, axis: int, **_: Any) -> list[np.ndarray]:
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]
