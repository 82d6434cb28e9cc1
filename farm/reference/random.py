"""PRNG rules: keys are held as their uint32 key data.

``threefry2x32`` and ``iota_2x32_shape`` are spelled out in NumPy uint32 arithmetic
(Threefry-2x32, 20 rounds, Salmon et al. 2011). The key-level primitives
(``random_seed``, ``random_bits``, ``random_split``, ``random_fold_in``) are defined by
their key implementation's functions; those are traced to a jaxpr and evaluated with
these same rules, so the bits come from NumPy, not from JAX's kernels.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from farm.stages import compat
from farm.reference.evaluator import Ctx, call_jaxpr, key_impl, register

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(k1: np.ndarray, k2: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds on uint32 arrays (broadcast together)."""
    k1, k2, x1, x2 = (np.asarray(a, dtype=np.uint32) for a in np.broadcast_arrays(k1, k2, x1, x2))
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x0, x1 = x1 + ks[0], x2 + ks[1]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
            x1 = x1 ^ x0
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + np.uint32(block + 1)
    return x0, x1


@register("threefry2x32")
def _threefry2x32(ctx: Ctx, k1: np.ndarray, k2: np.ndarray, x1: np.ndarray, x2: np.ndarray, **_: Any) -> list:
    return list(threefry2x32(k1, k2, x1, x2))


@register("iota_2x32_shape")
def _iota_2x32_shape(ctx: Ctx, *, shape: tuple[int, ...], **_: Any) -> list[np.ndarray]:
    flat = np.arange(int(np.prod(shape)), dtype=np.uint64).reshape(shape)
    return [(flat >> np.uint64(32)).astype(np.uint32), (flat & np.uint64(0xFFFFFFFF)).astype(np.uint32)]


@register("random_wrap")
def _random_wrap(ctx: Ctx, base: np.ndarray, **_: Any) -> np.ndarray:
    return base.astype(np.uint32)


@register("random_unwrap")
def _random_unwrap(ctx: Ctx, keys: np.ndarray, **_: Any) -> np.ndarray:
    return keys.copy()


def _via(fn: Any, *args: np.ndarray, avals: Any = None) -> list[np.ndarray]:
    """Trace ``fn`` (a key implementation's function on base arrays, or a primitive's
    impl over ``avals``) and evaluate that jaxpr here."""
    import jax  # noqa: PLC0415

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (avals if avals is not None else args)]
    closed = jax.make_jaxpr(fn)(*specs)
    return call_jaxpr(closed, list(args))


def _prng() -> Any:
    from jax._src.random import prng  # noqa: PLC0415

    return prng


@register("random_seed")
def _random_seed(ctx: Ctx, seeds: np.ndarray, *, impl: Any, **_: Any) -> np.ndarray:
    return _via(functools.partial(_prng().random_seed_impl_base, impl=impl), seeds)[0]


@register("random_bits")
def _random_bits(ctx: Ctx, keys: np.ndarray, *, bit_width: int, shape: tuple[int, ...], **_: Any) -> np.ndarray:
    impl, ndim = key_impl(ctx.in_avals[0].dtype), len(ctx.in_avals[0].shape)
    fn = functools.partial(_prng().random_bits_impl_base, impl, keys_ndim=ndim, bit_width=bit_width, shape=shape)
    return _via(fn, keys)[0]


@register("random_split")
def _random_split(ctx: Ctx, keys: np.ndarray, *, shape: tuple[int, ...], **_: Any) -> np.ndarray:
    impl, ndim = key_impl(ctx.in_avals[0].dtype), len(ctx.in_avals[0].shape)
    return _via(functools.partial(_prng().random_split_impl_base, impl, keys_ndim=ndim, shape=shape), keys)[0]


@register("random_fold_in")
def _random_fold_in(ctx: Ctx, keys: np.ndarray, msgs: np.ndarray, **_: Any) -> np.ndarray:
    impl, shape = key_impl(ctx.in_avals[0].dtype), tuple(ctx.in_avals[0].shape)
    return _via(functools.partial(_prng().random_fold_in_impl_base, impl, keys_shape=shape), keys, msgs)[0]


@register("random_gamma")
def _random_gamma(ctx: Ctx, keys: np.ndarray, a: np.ndarray, *, log_space: bool, **_: Any) -> np.ndarray:
    fn = functools.partial(compat.gamma_impl(), log_space=log_space, use_vmap=True)
    return _via(fn, keys, a, avals=ctx.in_avals)[0]


@register("rng_bit_generator")
def _rng_bit_generator(ctx: Ctx, key: np.ndarray, *, shape: tuple[int, ...], dtype: Any, **_: Any) -> list:
    """Its bits are implementation-defined (XLA picks Philox or Threefry and the layout):
    the reference gives only placeholders of the promised shapes, and the verdict checks
    the device's bits by their statistics (``farm.reference.invariants``)."""
    return [np.asarray(key).copy(), np.zeros(shape, dtype=np.dtype(dtype))]
