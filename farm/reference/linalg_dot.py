"""Contractions: ``dot_general`` and ``conv_general_dilated``.

Floats contract in float64 (complex128); integers in int64/uint64 and then wrap to
the promised dtype, which is what an exact integer accumulator of that width gives.
"""
from __future__ import annotations

import itertools
import string
from typing import Any

import numpy as np

from farm.reference.evaluator import Ctx, ref_dtype, register
from farm.reference.shapes import pad


def _compute_dtype(out_dtype: np.dtype, *xs: np.ndarray) -> np.dtype:
    """The dtype the contraction runs in before wrapping to ``out_dtype``."""
    if out_dtype == np.bool_ or np.issubdtype(out_dtype, np.integer):
        return np.dtype(np.uint64 if np.issubdtype(out_dtype, np.unsignedinteger) else np.int64)
    if any(np.iscomplexobj(x) for x in xs) or np.issubdtype(out_dtype, np.complexfloating):
        return np.dtype(np.complex128)
    return np.dtype(np.float64)


def _finish(acc: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    if out_dtype == np.bool_:
        return acc != 0
    return acc.astype(ref_dtype(out_dtype))


@register("dot_general")
def _dot_general(ctx: Ctx, lhs: np.ndarray, rhs: np.ndarray, *, dimension_numbers: Any, **_: Any) -> np.ndarray:
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = ctx.out_dtype
    cd = _compute_dtype(out_dtype, lhs, rhs)
    letters = iter(string.ascii_letters)
    l_sub = [next(letters) for _ in range(lhs.ndim)]
    r_sub = [None] * rhs.ndim
    for a, b in zip(lb, rb):
        r_sub[b] = l_sub[a]
    for a, b in zip(lc, rc):
        r_sub[b] = l_sub[a]
    r_sub = [s or next(letters) for s in r_sub]
    out = [l_sub[a] for a in lb]
    out += [l_sub[a] for a in range(lhs.ndim) if a not in lb and a not in lc]
    out += [r_sub[b] for b in range(rhs.ndim) if b not in rb and b not in rc]
    spec = f"{''.join(l_sub)},{''.join(r_sub)}->{''.join(out)}"
    acc = np.einsum(spec, lhs.astype(cd), rhs.astype(cd))
    return _finish(np.asarray(acc), out_dtype)


@register("conv_general_dilated")
def _conv(ctx: Ctx, lhs: np.ndarray, rhs: np.ndarray, *, window_strides: Any, padding: Any, lhs_dilation: Any,
          rhs_dilation: Any, dimension_numbers: Any, feature_group_count: int, batch_group_count: int,
          **_: Any) -> np.ndarray:
    out_dtype = ctx.out_dtype
    cd = _compute_dtype(out_dtype, lhs, rhs)
    return _finish(conv(lhs.astype(cd), rhs.astype(cd), window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count), out_dtype)


def conv(lhs: np.ndarray, rhs: np.ndarray, strides: Any, padding: Any, lhs_dilation: Any, rhs_dilation: Any,
         dn: Any, feature_groups: int = 1, batch_groups: int = 1) -> np.ndarray:
    """XLA's convolution, spelled out: dilate and pad the input, dilate the kernel, then
    for each kernel offset contract the strided input view with that kernel slice."""
    lhs_spec, rhs_spec, out_spec = dn
    x = np.transpose(lhs, lhs_spec)  # N C S...
    w = np.transpose(rhs, rhs_spec)  # O I S...
    nsp = x.ndim - 2
    zero = np.zeros((), dtype=x.dtype)
    x = pad(x, zero, [(0, 0, 0)] * 2 + [(lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation)])
    w = pad(w, zero, [(0, 0, 0)] * 2 + [(0, 0, d - 1) for d in rhs_dilation])
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    k = w.shape[2:]
    out_sp = tuple(max(0, (x.shape[2 + d] - k[d]) // strides[d] + 1) for d in range(nsp))
    b, g = batch_groups, feature_groups
    xg = x.reshape((b, n // b, g, c // g) + x.shape[2:])
    wg = w.reshape((b, g, o // (b * g), i) + k)
    acc = np.zeros((n // b, b, g, o // (b * g)) + out_sp, dtype=x.dtype)
    for off in itertools.product(*(range(kk) for kk in k)):
        sl = tuple(slice(off[d], off[d] + (out_sp[d] - 1) * strides[d] + 1, strides[d]) if out_sp[d] else slice(0, 0)
                   for d in range(nsp))
        view = xg[(slice(None),) * 4 + sl]  # b n g c S_out...
        kern = wg[(slice(None),) * 4 + off]  # b g o i
        acc = acc + np.einsum("bngc...,bgoc->nbgo...", view, kern)
    res = acc.reshape((n // b, o) + out_sp)
    return np.transpose(res, np.argsort(out_spec))
