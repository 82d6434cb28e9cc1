"""The farm's own small Pallas kernels (catalog ``pallas``): one feature of ``pallas_call`` each,
written without compiler parameters so each lowers for every backend that takes it (Mosaic TPU
per generation, Mosaic GPU and Triton for cuda, Triton for rocm).

| kernel | what it uses |
|---|---|
| ``add_grid`` | a 2-D grid of (8, 128) BlockSpecs; a shape that is not a multiple of the block |
| ``masked_copy`` | a load and a store with a mask (``pltpu.load``/``pltpu.store``: a ragged tail) |
| ``gather_rows`` | scalar prefetch: block indices read from an int32 operand (``PrefetchScalarGridSpec``) |
| ``scratch_sum`` | ``pl.run_scoped`` scratch memory as an accumulator |
| ``scale_1d`` | 1-D blocks (Mosaic TPU asks ``tpu_info`` about the chip) |
| ``row_sum`` | a reduction: the output block revisited along the grid's last axis, ``pl.when`` to initialize |
| ``sign`` | ``jnp.sign`` (Mosaic TPU asks ``tpu_info`` about the chip) |
| ``copy_symbolic`` | a symbolic grid: exported at shapes ``(w, h)`` |

JAX's refusals are limitations naming its error; the rest must lower, export and round-trip.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from farm.catalog import Kernel, Limitation, RandArg, CustomArg, define

FAMILY = "pallas"
CATALOG = "pallas"
ALL = ("mosaic_tpu", "mosaic_gpu", "triton")
TPU = ("mosaic_tpu",)

#: JAX refuses Mosaic GPU for ROCm (every kernel that would lower to it).
ROCM_MOSAIC = Limitation("Mosaic GPU does not support ROCm", platforms=("rocm:mosaic_gpu",), stage="pallas_export",
                         error="Mosaic GPU does not yet support AMD ROCm devices")
#: Mosaic GPU refuses a block of fewer than 128 elements in shared memory.
MOSAIC_GPU_SMALL_BLOCK = Limitation("Mosaic GPU needs blocks of a multiple of 128 elements", platforms=("cuda:mosaic_gpu",),
                                    stage="pallas_export", error="must have a number of elements that is a multiple of 128")
#: The cuda lowering refuses a grid whose bounds are symbolic.
CUDA_SYMBOLIC_GRID = Limitation("symbolic grid bounds are refused for GPU lowering", platforms=("cuda", "rocm"),
                                stage="pallas_export", error="dynamic grid bounds not supported")


def _kernel(build, backends, limitations=()):  # noqa: ANN001, ANN202
    return Kernel(build, backends), [ROCM_MOSAIC, *limitations] if "mosaic_gpu" in backends else list(limitations)


# ---- add_grid: 2-D grid, (8, 128) blocks ----

def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _add_grid(interpret):
    def f(x, y):
        spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
        grid = (pl.cdiv(x.shape[0], 8), pl.cdiv(x.shape[1], 128))
        return pl.pallas_call(_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[spec, spec], out_specs=spec, interpret=interpret)(x, y)
    return f


for shape, dt in [((16, 256), "float32"), ((24, 384), "bfloat16"), ((20, 200), "float32")]:
    kernel, lims = _kernel(_add_grid, ALL)
    define(FAMILY, "add_grid", _add_grid(True), [RandArg(shape, dt), RandArg(shape, dt)], dtype=dt, group="farm",
           catalog=CATALOG, reference=lambda x, y: x + y, pallas=kernel, limitations=lims)


# ---- masked_copy: a masked store, and a masked load too ----

#: Mosaic TPU's load rule raises a bare NotImplementedError for a mask (``pltpu.load`` takes one).
TPU_MASKED_LOAD = Limitation("Mosaic TPU does not lower a masked load (a bare NotImplementedError)",
                             platforms=("tpu",), stage="pallas_export", error="^NotImplementedError: NotImplementedError$")
#: Mosaic GPU cannot lay out the iota the mask is made from.
MOSAIC_GPU_IOTA = Limitation("Mosaic GPU cannot infer the layout of an iota", platforms=("cuda:mosaic_gpu",),
                             stage="pallas_export", error="Failed to infer the output layout of the iota")


def _masked_copy(n, masked_load, interpret):
    block = 128

    def kernel(x_ref, o_ref):
        idx = pl.program_id(0) * block + jax.lax.broadcasted_iota(jnp.int32, (block,), 0)
        mask = idx < n
        o_ref[...] = jnp.zeros((block,), o_ref.dtype)
        x = pltpu.load(x_ref, mask=mask) if masked_load else x_ref[...]
        pltpu.store(o_ref, x * 2, mask=mask)

    def f(x):
        spec = pl.BlockSpec((block,), lambda i: (i,))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // block,),
                              in_specs=[spec], out_specs=spec, interpret=interpret)(x)
    return f


for size, n, masked_load in [(256, 200, False), (512, 300, False), (256, 200, True)]:
    kernel, lims = _kernel(functools.partial(_masked_copy, n, masked_load), ALL,
                           [MOSAIC_GPU_IOTA, *([TPU_MASKED_LOAD] if masked_load else [])])
    define(FAMILY, "masked_copy", _masked_copy(n, masked_load, True), [RandArg((size,), "float32")], dtype="float32",
           group="farm", params={"n": n, "load": "masked" if masked_load else "whole"}, catalog=CATALOG,
           reference=lambda x, n=n: np.where(np.arange(x.size) < n, 2 * x, 0), pallas=kernel, limitations=lims)


# ---- gather_rows: scalar prefetch ----

def _gather_rows(interpret):
    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(idx, x):
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(idx.shape[0],),
            in_specs=[pl.BlockSpec((8, x.shape[1]), lambda i, idx_ref: (idx_ref[i], 0))],
            out_specs=pl.BlockSpec((8, x.shape[1]), lambda i, idx_ref: (i, 0)))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((idx.shape[0] * 8, x.shape[1]), x.dtype),
                              grid_spec=grid_spec, interpret=interpret)(idx, x)
    return f


def _gather_ref(idx, x):
    return np.concatenate([x[8 * i:8 * i + 8] for i in np.asarray(idx)])


for rows, picks in [(64, (3, 0, 7, 3)), (40, (4, 1, 2))]:
    kernel, lims = _kernel(_gather_rows, TPU)
    define(FAMILY, "gather_rows", _gather_rows(True),
           [CustomArg(f"block_indices={picks}", lambda r, p=picks: np.asarray(p, np.int32), (len(picks),), "int32"),
            RandArg((rows, 128), "float32")],
           dtype="float32", group="farm", catalog=CATALOG, reference=_gather_ref, pallas=kernel, limitations=lims)


# ---- scratch_sum: run_scoped scratch as an accumulator ----

def _scratch_sum(interpret):
    def kernel(x_ref, o_ref):
        def body(acc_ref):
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
            for r in range(x_ref.shape[0] // 8):
                acc_ref[...] += x_ref[pl.ds(8 * r, 8), :].astype(jnp.float32)
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)
        pl.run_scoped(body, pltpu.VMEM((8, x_ref.shape[1]), jnp.float32))

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, x.shape[1]), x.dtype),
                              interpret=interpret)(x)
    return f


for shape in [(32, 128), (24, 256)]:
    kernel, lims = _kernel(_scratch_sum, TPU)
    define(FAMILY, "scratch_sum", _scratch_sum(True), [RandArg(shape, "float32")], dtype="float32", group="farm",
           catalog=CATALOG, reference=lambda x: x.reshape(-1, 8, x.shape[1]).sum(0), tol=(1e-5, 1e-5),
           pallas=kernel, limitations=lims)


# ---- scale_1d: 1-D blocks ----

def _scale_1d(interpret):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3.0 + 1.0

    def f(x):
        spec = pl.BlockSpec((256,), lambda i: (i,))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(pl.cdiv(x.shape[0], 256),),
                              in_specs=[spec], out_specs=spec, interpret=interpret)(x)
    return f


for size in (1024, 1000):
    kernel, lims = _kernel(_scale_1d, ALL)
    define(FAMILY, "scale_1d", _scale_1d(True), [RandArg((size,), "float32")], dtype="float32", group="farm",
           catalog=CATALOG, reference=lambda x: x * 3 + 1, pallas=kernel, limitations=lims)


# ---- row_sum: a reduction over the grid's last axis ----

def _row_sum(interpret):
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
        o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((x.shape[0], 1), x.dtype),
                              grid=(x.shape[0] // 8, x.shape[1] // 128),
                              in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
                              out_specs=pl.BlockSpec((8, 1), lambda i, k: (i, 0)), interpret=interpret)(x)
    return f


for shape in [(16, 512), (24, 384)]:
    kernel, lims = _kernel(_row_sum, ALL, [MOSAIC_GPU_SMALL_BLOCK])
    define(FAMILY, "row_sum", _row_sum(True), [RandArg(shape, "float32")], dtype="float32", group="farm",
           catalog=CATALOG, reference=lambda x: x.sum(1, keepdims=True), tol=(1e-4, 1e-4), pallas=kernel,
           limitations=lims)


# ---- sign: jnp.sign (Mosaic TPU asks which chip it lowers for) ----

def _sign(interpret):
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.sign(x_ref[...])

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
    return f


for shape, dt in [((8, 128), "float32"), ((16, 256), "float32"), ((16, 128), "bfloat16")]:
    kernel, lims = _kernel(_sign, ALL)  # bfloat16: Mosaic TPU lowers it one way before v4, another from v4 on
    define(FAMILY, "sign", _sign(True), [RandArg(shape, dt)], dtype=dt, group="farm", catalog=CATALOG,
           reference=np.sign, pallas=kernel, limitations=lims)


# ---- copy_symbolic: a symbolic grid ----

def _copy_symbolic(interpret):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(x.shape[0] // 8, x.shape[1] // 128), in_specs=[spec], out_specs=spec,
                              interpret=interpret)(x)
    return f


kernel = Kernel(_copy_symbolic, ALL, symbolic=("8*w, 128*h",))
define(FAMILY, "copy_symbolic", _copy_symbolic(True), [RandArg((16, 256), "float32")], dtype="float32", group="farm",
       catalog=CATALOG, reference=lambda x: x, pallas=kernel, limitations=[ROCM_MOSAIC, CUDA_SYMBOLIC_GRID])
