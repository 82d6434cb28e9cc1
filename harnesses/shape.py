"""Data movement and shape primitives over every dtype: reshape, transpose,
broadcast_in_dim, pad, concatenate, slice, dynamic_slice, dynamic_update_slice, rev,
squeeze, expand_dims, iota, select_n, clamp. Results are compared exactly."""
import numpy as np
from jax import lax

from farm.catalog import (ALL, CLAMP_CROSSED_GRAD, FLOAT, INTEGER, NUMERIC, CustomArg, DtypeArg, RandArg, StaticArg, define,
                          np_dtype)

FAMILY = "shape"
SHAPE = (2, 3, 4)


def _pad_ref(x, pad_value, config):
    """lax.pad semantics: interior padding, then low/high (negative trims)."""
    out = x
    for axis, (lo, hi, interior) in enumerate(config):
        n = out.shape[axis]
        if interior and n > 1:
            size = n + (n - 1) * interior
            shape = list(out.shape)
            shape[axis] = size
            grown = np.full(shape, pad_value, out.dtype)
            idx = [slice(None)] * out.ndim
            idx[axis] = slice(None, None, interior + 1)
            grown[tuple(idx)] = out
            out = grown
        for amount, at_end in ((lo, False), (hi, True)):
            if amount > 0:
                shape = list(out.shape)
                shape[axis] = amount
                block = np.full(shape, pad_value, out.dtype)
                out = np.concatenate([out, block] if at_end else [block, out], axis=axis)
            elif amount < 0:
                idx = [slice(None)] * out.ndim
                idx[axis] = slice(None, amount) if at_end else slice(-amount, None)
                out = out[tuple(idx)]
    return out


def _starts(idx, dims, sizes):
    """lax wraps negative starts once (i + dim), then clamps so the slice fits."""
    return [int(np.clip(i + d if i < 0 else i, 0, d - s)) for i, d, s in zip(idx, dims, sizes)]


def _dynamic_slice_ref(x, idx, sizes):
    starts = _starts(idx, x.shape, sizes)
    return x[tuple(slice(st, st + s) for st, s in zip(starts, sizes))]


def _dynamic_update_ref(x, u, idx):
    starts = _starts(idx, x.shape, u.shape)
    out = x.copy()
    out[tuple(slice(st, st + s) for st, s in zip(starts, u.shape))] = u
    return out


PAD_CONFIG = ((1, 0, 0), (0, 2, 1), (-1, 1, 0))
#: Start indices (runtime int32 scalars); "clamped" has a negative and out-of-range starts.
DS_STARTS = {"inside": (1, 0, 1), "clamped": (5, -2, 3)}

for dt in ALL:
    x = RandArg(SHAPE, dt)
    same = dict(dtype=dt, compare="exact")
    define(FAMILY, "reshape", lambda x: lax.reshape(x, (4, 6)), [x], reference=lambda x: x.reshape(4, 6), **same)
    define(FAMILY, "reshape", lambda x: lax.reshape(x, (6, 4), dimensions=(2, 1, 0)), [x],
           params={"dimensions": "2,1,0"}, reference=lambda x: x.transpose(2, 1, 0).reshape(6, 4), **same)
    define(FAMILY, "transpose", lambda x: lax.transpose(x, (2, 0, 1)), [x],
           reference=lambda x: x.transpose(2, 0, 1), **same)
    define(FAMILY, "broadcast_in_dim", lambda x: lax.broadcast_in_dim(x[:, :1], (2, 5, 3, 4), (0, 2, 3)), [x],
           reference=lambda x: np.broadcast_to(x[:, None, :1, :], (2, 5, 3, 4)), **same)
    define(FAMILY, "pad", lambda x: lax.pad(x, np.array(0, x.dtype), PAD_CONFIG), [x], params={"config": "lo_hi_interior_neg"},
           reference=lambda x: _pad_ref(x, 0, PAD_CONFIG), **same)
    define(FAMILY, "concatenate", lambda a, b: lax.concatenate([a, b, a], 1), [x, RandArg((2, 2, 4), dt)],
           reference=lambda a, b: np.concatenate([a, b, a], 1), **same)
    define(FAMILY, "slice", lambda x: lax.slice(x, (0, 1, 0), (2, 3, 4), (1, 1, 2)), [x],
           params={"strides": "1,1,2"}, reference=lambda x: x[0:2, 1:3, 0:4:2], **same)
    for label, starts in DS_STARTS.items():
        define(FAMILY, "dynamic_slice", lambda x, i, j, k: lax.dynamic_slice(x, (i, j, k), (1, 2, 2)),
               [x, CustomArg(f"start0={starts[0]}", lambda rng, v=starts[0]: np.int32(v)),
                CustomArg(f"start1={starts[1]}", lambda rng, v=starts[1]: np.int32(v)),
                CustomArg(f"start2={starts[2]}", lambda rng, v=starts[2]: np.int32(v))],
               params={"starts": label},
               reference=lambda x, i, j, k: _dynamic_slice_ref(x, (i, j, k), (1, 2, 2)), **same)
        define(FAMILY, "dynamic_update_slice", lambda x, u, i, j, k: lax.dynamic_update_slice(x, u, (i, j, k)),
               [x, RandArg((1, 2, 2), dt), CustomArg(f"start0={starts[0]}", lambda rng, v=starts[0]: np.int32(v)),
                CustomArg(f"start1={starts[1]}", lambda rng, v=starts[1]: np.int32(v)),
                CustomArg(f"start2={starts[2]}", lambda rng, v=starts[2]: np.int32(v))],
               params={"starts": label},
               reference=lambda x, u, i, j, k: _dynamic_update_ref(x, u, (i, j, k)), **same)
    define(FAMILY, "rev", lambda x: lax.rev(x, (0, 2)), [x], reference=lambda x: np.flip(x, (0, 2)), **same)
    define(FAMILY, "squeeze", lambda x: lax.squeeze(x, (1,)), [RandArg((3, 1, 4), dt)],
           reference=lambda x: np.squeeze(x, 1), **same)
    define(FAMILY, "expand_dims", lambda x: lax.expand_dims(x, (0, 3)), [x],
           reference=lambda x: np.expand_dims(x, (0, 3)), **same)
    define(FAMILY, "select_n", lambda p, a, b: lax.select_n(p, a, b), [RandArg(SHAPE, "bool"), x, RandArg(SHAPE, dt)],
           reference=lambda p, a, b: np.where(p, b, a), **same)
    define(FAMILY, "select_n", lambda p, a, b, c: lax.select_n(p, a, b, c),
           [CustomArg("case_0_to_2", lambda rng: rng.integers(0, 3, SHAPE).astype(np.int32), SHAPE, "int32"),
            x, RandArg(SHAPE, dt), RandArg(SHAPE, dt)], params={"cases": 3},
           reference=lambda p, a, b, c: np.choose(p, [a, b, c]), **same)

for dt in NUMERIC:
    define(FAMILY, "iota", lambda to: lax.iota(np_dtype(to), 7), [DtypeArg(dt)], dtype=dt, shapes=[(7,)],
           reference=lambda to, dt=dt: np.arange(7).astype(np_dtype(dt)), compare="exact")
    define(FAMILY, "iota", lambda to: lax.broadcasted_iota(np_dtype(to), (3, 4), 1), [DtypeArg(dt)], dtype=dt,
           shapes=[(3, 4)], params={"dimension": 1},
           reference=lambda to, dt=dt: np.broadcast_to(np.arange(4), (3, 4)).astype(np_dtype(dt)), compare="exact")

# clamp: an ordered type; bounds as scalars and as arrays (lo <= hi everywhere).
for dt in INTEGER + FLOAT:
    define(FAMILY, "clamp", lambda lo, x, hi: lax.clamp(lo, x, hi),
           [CustomArg("minus_one", lambda rng, dt=dt: np.array(-1 if dt not in ("uint8", "uint16", "uint32", "uint64")
                                                              else 2, np_dtype(dt))),
            RandArg(SHAPE, dt), CustomArg("plus_three", lambda rng, dt=dt: np.array(3 if dt[0] != "u" else 30, np_dtype(dt)))],
           dtype=dt, shapes=[(), SHAPE, ()], reference=lambda lo, x, hi: np.clip(x, lo, hi), compare="exact")

# clamp with crossed bounds (lo > hi): XLA's clamp, as np.clip, is min(max(x, lo), hi), so hi everywhere.
# The bounds are arrays: with scalar bounds JAX cannot differentiate clamp at all (KNOWN_GAPS).
for dt in FLOAT:
    define(FAMILY, "clamp", lambda lo, x, hi: lax.clamp(lo, x, hi),
           [CustomArg("plus_one", lambda rng, dt=dt: np.ones(SHAPE, np_dtype(dt))), RandArg(SHAPE, dt),
            CustomArg("minus_one", lambda rng, dt=dt: -np.ones(SHAPE, np_dtype(dt)))],
           dtype=dt, shapes=[SHAPE, SHAPE, SHAPE], params={"bounds": "crossed"},
           reference=lambda lo, x, hi: np.clip(x, lo, hi), compare="exact", limitations=list(CLAMP_CROSSED_GRAD))
