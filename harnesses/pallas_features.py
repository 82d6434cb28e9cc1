"""The Pallas API surface, one kernel per feature (catalog ``pallas``, family ``pallas_features``):
the feature × target matrix (``farm pallas-matrix --family pallas_features``, docs/pallas.md).

Each harness is a small kernel that uses one feature of ``pallas_call`` (or of one backend's
compiler parameters), lowered for every target the feature's backend has (every TPU generation
the installed jax knows, Triton for cuda and rocm, Mosaic GPU where this jax lowers it) and run
in interpret mode against a NumPy reference.

| feature | what the kernel does | backends |
|---|---|---|
| ``program_id`` | a 3-D grid; each program adds its ``program_id`` and ``num_programs`` to its block | all |
| ``named_grid`` | a grid of named axes, read back with ``lax.axis_index`` | all |
| ``vmap`` | ``jax.vmap`` of a ``pallas_call`` (a named grid too), exported with a symbolic batch | all |
| ``aliases`` | ``input_output_aliases``: the output written into the input's buffer | all |
| ``cost_estimate`` | ``pl.CostEstimate``: must reach the TPU custom call's configuration | all |
| ``metadata`` | ``metadata=`` and ``name=``: must reach the custom call | all |
| ``fori_loop`` | ``lax.fori_loop`` over a block's rows inside the kernel | all |
| ``when`` | ``pl.when`` on the program id: half the programs write, half zero their block | all |
| ``async_copy`` | an HBM operand (``pl.ANY``) copied into sliced VMEM refs with DMA semaphores | Mosaic TPU |
| ``scratch_shapes`` | ``scratch_shapes``: a VMEM scratch and an SMEM scalar kept across the grid | Mosaic TPU |
| ``prng_key`` | a PRNG key into a TPU kernel (SMEM) and back out, and ``prng_seed`` bits | Mosaic TPU |
| ``tpu_params`` | one ``pltpu.CompilerParams`` field each: it must reach the configuration | Mosaic TPU |
| ``triton_params`` | ``num_warps`` and ``num_stages``: they must reach the Triton call | Triton |
| ``atomic_add`` | ``plgpu.atomic_add`` (Triton) scattering into an output | Triton |
| ``dynamic_export`` | ``pl.pallas_export_experimental(dynamic_shapes=True)``: a symbolic array shape | Mosaic TPU |

A kernel's ``config`` (``Kernel.config``) is what the custom call's configuration must then hold
(``farm.judge.pallas``): a parameter that lowers without an error but never reaches the backend
is a ``fail``, as Triton's dropped ``accuracy=`` was (docs/findings.md).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from farm.catalog import ROCM_MOSAIC, ROCM_MOSAIC_MESH, CustomArg, Kernel, Limitation, RandArg, define

FAMILY = "pallas_features"
CATALOG = "pallas"
GROUP = "features"
ALL = ("mosaic_tpu", "mosaic_gpu", "triton")
TPU = ("mosaic_tpu",)
TRITON = ("triton",)
BLOCK = (8, 128)


#: What jax 0.10.2's pl.pallas_call lowered with Mosaic GPU refuses (jax 0.12 has no such lowering: its
#: Mosaic GPU targets export a plgpu.kernel twin, or are skipped). The ROCm refusals (ROCM_MOSAIC, and
#: ROCM_MOSAIC_MESH for a twin) are shared with pallas_prims (farm.catalog).
MGPU_VMAP = Limitation("Mosaic GPU (jax 0.10.2's pallas_call) fails a jax.vmap of a kernel with a bare AssertionError",
                       platforms=("cuda:mosaic_gpu",), stage="pallas_export", error="^AssertionError: AssertionError$",
                       jax="<0.12")
MGPU_FORI_LAYOUT = Limitation(
    "Mosaic GPU (jax 0.10.2's pallas_call) cannot carry a value through fori_loop whose initial layout (a splat of "
    "zeros) differs from the body's (strided): a ValueError of the two layouts", platforms=("cuda:mosaic_gpu",),
    stage="pallas_export", error="WGStridedFragLayout.*WGSplatFragLayout", jax="<0.12")




#: jax 0.9.2 to 0.11's Mosaic GPU lowering of pallas_call drops a kernel's cost estimate (``del cost_estimate
#: # Unused.`` in ``pallas/mosaic_gpu/lowering.py``): it never reaches the custom call. jax 0.12's plgpu.kernel
#: carries it (``cost_estimate_json``).
MGPU_DROPS_COST = Limitation("jax before 0.12 drops a pallas_call's cost_estimate in its Mosaic GPU lowering (its "
                             "lowering deletes it as unused): the custom call never holds it",
                             platforms=("cuda:mosaic_gpu",), stage="pallas_export",
                             error="asked for cost_estimate = .* has no cost_estimate", jax="<0.12")


def _spec(*block: int):  # noqa: ANN202
    """The (i, j) block of a 2-D grid."""
    return pl.BlockSpec(block or BLOCK, lambda i, j, *rest: (i, j))


def _harness(feature: str, build, args, reference, *, backends=ALL, params=None, dtype="float32",  # noqa: ANN001
             tol=None, config=None, symbolic=(), dynamic_shapes=False, limitations=(), needs=None,
             twin=None) -> None:
    """``twin``: the same computation written with ``plgpu.kernel`` (a function of the arrays), exported
    for the Mosaic GPU targets of a jax whose ``pallas_call`` has no Mosaic GPU lowering (0.12); None:
    those targets are ``skipped`` there, with the reason."""
    if "mosaic_gpu" in backends:
        limitations = [ROCM_MOSAIC, *limitations, *([ROCM_MOSAIC_MESH] if twin is not None else [])]
    define(FAMILY, feature, build(True), args, dtype=dtype, group=GROUP, params=params, catalog=CATALOG,
           reference=reference, tol=tol, limitations=limitations, needs=needs,
           pallas=Kernel(build, tuple(backends), symbolic=tuple(symbolic), config=dict(config or {}),
                         dynamic_shapes=dynamic_shapes, mosaic_gpu=None if twin is None else (lambda: twin)))


# ---- Mosaic GPU twins (jax 0.12: plgpu.kernel) ----
#
# Mosaic GPU's own way to write each feature: ``plgpu.kernel`` over the whole arrays in GMEM, a grid of
# CTAs named with ``grid_names`` (read with ``lax.axis_index``), ``plgpu.emit_pipeline`` stepping one CTA
# through the blocks (its step's first argument: the block's indices, the ``program_id`` of a pipeline
# step). Each twin computes what the ``pallas_call`` kernel does; only its lowering is judged here (GPU
# interpret mode has no rule for the pipeline's predicated copies: "predicate not supported").

def _plgpu():  # noqa: ANN202
    from jax.experimental.pallas import mosaic_gpu as plgpu
    return plgpu


def _pipelined(step, grid, in_specs, out_specs, out_type, **kernel):  # noqa: ANN001, ANN202, ANN003
    """A ``plgpu.kernel`` whose one CTA runs ``step(indices, *block_refs)`` over ``grid``."""
    plgpu = _plgpu()

    def body(*refs):  # noqa: ANN002, ANN202
        plgpu.emit_pipeline(step, grid=grid, in_specs=in_specs, out_specs=out_specs)(*refs)
    return plgpu.kernel(body, out_type=out_type, **kernel)


def _twin_elementwise(fn, **kernel):  # noqa: ANN001, ANN202, ANN003
    """``fn`` of (8, 128) blocks over a 2-D grid of them, in one CTA."""
    def f(*xs):  # noqa: ANN002, ANN202
        def step(_, *refs):  # noqa: ANN001, ANN002, ANN202
            *in_refs, o_ref = refs
            o_ref[...] = fn(*(r[...] for r in in_refs))
        grid = (xs[0].shape[0] // 8, xs[0].shape[1] // 128)
        return _pipelined(step, grid, [_spec() for _ in xs], [_spec()],
                          jax.ShapeDtypeStruct(xs[0].shape, xs[0].dtype), **kernel)(*xs)
    return f


def _twin_grid_names(names, each):  # noqa: ANN001, ANN202
    """A CTA per (8, 128) block, on a grid named ``names``: ``each(i, j, block)`` its result (the grid's
    sizes: ``lax.axis_size`` of the names)."""
    def f(x):  # noqa: ANN001, ANN202
        grid = (x.shape[0] // 8, x.shape[1] // 128)

        def body(x_gmem, o_gmem):  # noqa: ANN001, ANN202
            i, j = (jax.lax.axis_index(n) for n in names)

            def step(_, x_block, o_block):  # noqa: ANN001, ANN202
                o_block[...] = each(i, j, x_block[...])
            at = pl.BlockSpec(BLOCK, lambda k: (i, j))
            _plgpu().emit_pipeline(step, grid=(1,), in_specs=[at], out_specs=[at])(x_gmem, o_gmem)
        return _plgpu().kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                               grid_names=names)(x)
    return f


# ---- program_id / num_programs: a 3-D grid ----

def _program_id(interpret):  # noqa: ANN001, ANN202
    def kernel(x_ref, o_ref):
        i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)

        @pl.when(k == 0)
        def _():
            o_ref[...] = x_ref[...]
        o_ref[...] += i * 1000 + j * 100 + k * 10 + pl.num_programs(0) + pl.num_programs(2) * 3

    def f(x):
        grid = (x.shape[0] // 8, x.shape[1] // 128, 4)
        spec = pl.BlockSpec(BLOCK, lambda i, j, k: (i, j))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[spec], out_specs=spec, interpret=interpret)(x)
    return f


def _program_id_ref(x):  # noqa: ANN001, ANN202
    out = np.array(x, dtype=np.int64)
    ni = x.shape[0] // 8
    for i in range(ni):
        for j in range(x.shape[1] // 128):
            out[8 * i:8 * i + 8, 128 * j:128 * j + 128] += sum(i * 1000 + j * 100 + k * 10 + ni + 12 for k in range(4))
    return out


#: The twin: a CTA per block on a named (i, j) grid; the pallas_call's third grid axis, which revisits
#: one output block, is a loop in the CTA (GPU CTAs run at once: none revisits another's block).
_program_id_twin = _twin_grid_names(("i", "j"), lambda i, j, b: b + sum(
    i * 1000 + j * 100 + k * 10 + jax.lax.axis_size("i") + 4 * 3 for k in range(4)))
_harness("program_id", _program_id, [RandArg((16, 384), "int32")], _program_id_ref, dtype="int32",
         twin=_program_id_twin)


# ---- named grid axes ----

def _named_grid(interpret):  # noqa: ANN001, ANN202
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 10.0 * jax.lax.axis_index("rows") + jax.lax.axis_index("cols")

    def f(x):
        grid = (("rows", x.shape[0] // 8), ("cols", x.shape[1] // 128))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[_spec()], out_specs=_spec(), interpret=interpret)(x)
    return f


def _named_grid_ref(x):  # noqa: ANN001, ANN202
    i = np.arange(x.shape[0])[:, None] // 8
    j = np.arange(x.shape[1])[None, :] // 128
    return x + 10.0 * i + j


#: Finding (docs/repros/pallas_named_grid_interpret.py, jax 0.10.2 and 0.12.0.1): the kernel lowers for
#: Mosaic TPU and Triton, but the HLO interpreter leaves the grid's names unbound.
NAMED_GRID_INTERPRET = Limitation(
    "finding: interpret mode cannot lower a kernel that reads a named grid axis with lax.axis_index "
    "(docs/repros/pallas_named_grid_interpret.py)", stage="lower", error="Found an unbound axis name: rows")
#: jax 0.10.2 fails the batched kernel earlier, in interpret mode's lowering: the grid gained vmap's axis,
#: its names did not.
VMAP_NAMED_GRID_INTERPRET_0_10 = Limitation(
    "interpret mode (jax 0.10.2) cannot lower a jax.vmap of a named-grid kernel: safe_zip of the grid's 3 axes "
    "with its 2 names", stage="lower", error="safe_zip\\(\\) argument 1 has length 3 but argument 0 has length 2",
    jax="<0.12")
#: Finding (docs/repros/pallas_triton_vmap_named_grid.py): jax.vmap of a named-grid kernel lowers for
#: Triton on jax 0.10.2, and raises IndexError in the Triton lowering's program_id rule on 0.12.0.1.
VMAP_NAMED_GRID_TRITON = Limitation(
    "finding: jax.vmap of a named-grid kernel no longer lowers for Triton (IndexError in _program_id_lowering_rule; "
    "docs/repros/pallas_triton_vmap_named_grid.py)", platforms=("cuda:triton", "rocm:triton"), stage="pallas_export",
    error="^IndexError: list index out of range$", jax=">=0.12")

_named_grid_twin = _twin_grid_names(("rows", "cols"), lambda i, j, b: b + 10.0 * i + j)
_harness("named_grid", _named_grid, [RandArg((16, 256), "float32")], _named_grid_ref,
         limitations=[NAMED_GRID_INTERPRET], twin=_named_grid_twin)


# ---- jax.vmap of a pallas_call ----

def _add(interpret):  # noqa: ANN001, ANN202
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + y_ref[...]

    def f(x, y):
        grid = (x.shape[0] // 8, x.shape[1] // 128)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[_spec(), _spec()], out_specs=_spec(), interpret=interpret)(x, y)
    return f


def _vmapped(inner, interpret):  # noqa: ANN001, ANN202
    return jax.vmap(inner(interpret))


_VMAP_ARGS = [RandArg((3, 16, 256), "float32"), RandArg((3, 16, 256), "float32")]
SYMBOLIC_GRID_GPU = Limitation("symbolic grid bounds are refused for GPU lowering", platforms=("cuda", "rocm:triton"),
                               stage="pallas_export", error="dynamic grid bounds not supported", jax="<0.12")
SYMBOLIC_GRID_TRITON = Limitation("symbolic grid bounds are refused for GPU lowering",
                                  platforms=("cuda:triton", "rocm:triton"), stage="pallas_export",
                                  error="dynamic grid bounds not supported", jax=">=0.12")
#: jax 0.12's vmap rule of plgpu.kernel puts the batch into the kernel's mesh grid, where a symbolic size
#: meets a bare assert (``tracing_grid_env``: every grid size an int), not a refusal that says so.
MGPU_VMAP_SYMBOLIC = Limitation(
    "jax 0.12's vmap of a plgpu.kernel cannot take a symbolic batch: its mesh grid meets a bare assert "
    "(every grid size an int) instead of a refusal", platforms=("cuda:mosaic_gpu", "rocm:mosaic_gpu"),
    stage="pallas_export", error="^AssertionError: AssertionError$", jax=">=0.12")
for kernel, symbolic in [("plain", ()), ("plain", ("b, 16, 256", "b, 16, 256"))]:
    _harness("vmap", functools.partial(_vmapped, _add), _VMAP_ARGS, lambda x, y: 2 * x + y,
             params={"kernel": kernel, "batch": "symbolic" if symbolic else "static"}, symbolic=symbolic,
             limitations=[MGPU_VMAP, *([SYMBOLIC_GRID_GPU, SYMBOLIC_GRID_TRITON, MGPU_VMAP_SYMBOLIC] if symbolic else [])],
             twin=jax.vmap(_twin_elementwise(lambda x, y: x * 2.0 + y)))
_harness("vmap", lambda interpret: jax.vmap(_named_grid(interpret)), [RandArg((2, 16, 256), "float32")],
         lambda x: np.stack([_named_grid_ref(b) for b in x]), params={"kernel": "named_grid", "batch": "static"},
         limitations=[VMAP_NAMED_GRID_INTERPRET_0_10, NAMED_GRID_INTERPRET, VMAP_NAMED_GRID_TRITON, MGPU_VMAP],
         twin=jax.vmap(_named_grid_twin))


# ---- input_output_aliases ----

def _aliases(interpret):  # noqa: ANN001, ANN202
    def kernel(x_ref, acc_ref, o_ref):
        o_ref[...] = acc_ref[...] + x_ref[...] * x_ref[...]

    def f(x, acc):
        grid = (x.shape[0] // 8, x.shape[1] // 128)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(acc.shape, acc.dtype), grid=grid,
                              in_specs=[_spec(), _spec()], out_specs=_spec(), input_output_aliases={1: 0},
                              interpret=interpret)(x, acc)
    return f


_harness("aliases", _aliases, [RandArg((16, 256), "float32"), RandArg((16, 256), "float32")],
         lambda x, acc: acc + x * x, tol=(1e-6, 1e-6), config={"output_operand_aliases": 1})


# ---- cost_estimate, metadata= and name= ----

def _exp(interpret, **extra):  # noqa: ANN001, ANN202
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.exp(x_ref[...])

    def f(x):
        grid = (x.shape[0] // 8, x.shape[1] // 128)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[_spec()], out_specs=_spec(), interpret=interpret,
                              **{k: v() for k, v in extra.items()})(x)
    return f


_SMALL = [RandArg((16, 256), "float32")]
_COST = {"flops": 4096, "transcendentals": 4096, "bytes_accessed": 32768}
_harness("cost_estimate",
         functools.partial(_exp, cost_estimate=lambda: pl.CostEstimate(**_COST)),
         _SMALL, np.exp, tol=(1e-6, 1e-6),
         config={"mosaic_tpu:custom_call_config.cost_estimate": _COST, "mosaic_gpu:cost_estimate": _COST},
         limitations=[MGPU_DROPS_COST],
         twin=_twin_elementwise(jnp.exp, cost_estimate=pl.CostEstimate(**_COST)))
#: plgpu.kernel names its kernel (``kernel_name=``, a Mesh field; Mosaic GPU's entry function is
#: ``<name>_mosaic_gpu``) and takes no metadata.
_harness("metadata", functools.partial(_exp, metadata=lambda: {"farm_feature": "metadata"},
                                       name=lambda: "farm_metadata_kernel"),
         _SMALL, np.exp, tol=(1e-6, 1e-6),
         config={"mosaic_tpu:kernel_name": "farm_metadata_kernel", "mosaic_tpu:kernel_metadata": {"farm_feature": "metadata"},
                 "triton:name": "farm_metadata_kernel", "mosaic_gpu:body.entry": "farm_metadata_kernel_mosaic_gpu"},
         twin=_twin_elementwise(jnp.exp, kernel_name="farm_metadata_kernel"))


# ---- fori_loop and pl.when inside a kernel ----

def _fori_loop(interpret):  # noqa: ANN001, ANN202
    def kernel(x_ref, o_ref):
        def body(r, acc):
            return acc + x_ref[pl.ds(r * 8, 8), :]
        o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // 8, body, jnp.zeros(o_ref.shape, o_ref.dtype))

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, x.shape[1]), x.dtype),
                              grid=(x.shape[1] // 128,), in_specs=[pl.BlockSpec((x.shape[0], 128), lambda j: (0, j))],
                              out_specs=pl.BlockSpec(BLOCK, lambda j: (0, j)), interpret=interpret)(x)
    return f


def _fori_loop_twin(x):  # noqa: ANN001, ANN202
    def step(_, x_block, o_block):  # noqa: ANN001, ANN202
        def body(r, acc):  # noqa: ANN001, ANN202
            return acc + x_block[pl.ds(r * 8, 8), :]
        o_block[...] = jax.lax.fori_loop(0, x_block.shape[0] // 8, body, jnp.zeros(o_block.shape, o_block.dtype))
    return _pipelined(step, (x.shape[1] // 128,), [pl.BlockSpec((x.shape[0], 128), lambda j: (0, j))],
                      [pl.BlockSpec(BLOCK, lambda j: (0, j))], jax.ShapeDtypeStruct((8, x.shape[1]), x.dtype))(x)


_harness("fori_loop", _fori_loop, [RandArg((64, 256), "float32")], lambda x: x.reshape(-1, 8, x.shape[1]).sum(0),
         tol=(1e-5, 1e-5), limitations=[MGPU_FORI_LAYOUT], twin=_fori_loop_twin)


def _when(interpret):  # noqa: ANN001, ANN202
    def kernel(x_ref, o_ref):
        even = pl.program_id(0) % 2 == 0

        @pl.when(even)
        def _():
            o_ref[...] = x_ref[...] - 1.0

        @pl.when(jnp.logical_not(even))
        def _():
            o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)

    def f(x):
        grid = (x.shape[0] // 8, x.shape[1] // 128)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[_spec()], out_specs=_spec(), interpret=interpret)(x)
    return f


def _when_twin(x):  # noqa: ANN001, ANN202
    def step(at, x_block, o_block):  # noqa: ANN001, ANN202
        even = at[0] % 2 == 0

        @pl.when(even)
        def _():  # noqa: ANN202
            o_block[...] = x_block[...] - 1.0

        @pl.when(jnp.logical_not(even))
        def _():  # noqa: ANN202
            o_block[...] = jnp.zeros(o_block.shape, o_block.dtype)
    return _pipelined(step, (x.shape[0] // 8, x.shape[1] // 128), [_spec()], [_spec()],
                      jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


_harness("when", _when, [RandArg((32, 128), "float32")],
         lambda x: np.where((np.arange(x.shape[0])[:, None] // 8) % 2 == 0, x - 1.0, 0.0), twin=_when_twin)


# ---- Mosaic TPU: async copies into sliced refs, DMA semaphores ----

def _async_copy(interpret):  # noqa: ANN001, ANN202
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_ref, sems):
        half = x_hbm.shape[0] // 2
        top = pltpu.make_async_copy(x_hbm.at[pl.ds(half, half)], o_ref.at[pl.ds(0, half)], sems.at[0])
        bottom = pltpu.make_async_copy(x_hbm.at[pl.ds(0, half)], o_ref.at[pl.ds(half, half)], sems.at[1])
        top.start()
        bottom.start()
        top.wait()
        bottom.wait()
        o_ref[...] = o_ref[...] * 2.0

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,))], interpret=interpret)(x)
    return f


def _swap_halves(x):  # noqa: ANN001, ANN202
    half = x.shape[0] // 2
    return 2.0 * np.concatenate([x[half:], x[:half]])


_harness("async_copy", _async_copy, [RandArg((16, 128), "float32")], _swap_halves, backends=TPU)


# ---- Mosaic TPU: scratch_shapes (VMEM and SMEM) kept across the grid ----

def _scratch_shapes(interpret):  # noqa: ANN001, ANN202
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref, acc_ref, count_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)
            count_ref[0] = 0

        acc_ref[...] += x_ref[...]
        count_ref[0] += 1
        o_ref[...] = acc_ref[...] / count_ref[0].astype(jnp.float32)

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(BLOCK, x.dtype), grid=(x.shape[0] // 8,),
                              in_specs=[pl.BlockSpec(BLOCK, lambda i: (i, 0))],
                              out_specs=pl.BlockSpec(BLOCK, lambda i: (0, 0)),
                              scratch_shapes=[pltpu.VMEM(BLOCK, jnp.float32), pltpu.SMEM((1,), jnp.int32)],
                              compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
                              interpret=interpret)(x)
    return f


_harness("scratch_shapes", _scratch_shapes, [RandArg((32, 128), "float32")],
         lambda x: x.reshape(-1, 8, 128).mean(0), backends=TPU, tol=(1e-5, 1e-5))


# ---- Mosaic TPU: a PRNG key into the kernel and back out; prng_seed ----

#: Findings (docs/repros/pallas_tpu_key_through_smem.py, jax 0.10.2 and 0.12.0.1): a typed key
#: through a kernel's SMEM makes the TPU lowering raise a bare StopIteration, and the HLO
#: interpreter refuses the key ("key<fry>").
KEY_TPU_STOPITERATION = Limitation(
    "finding: a typed PRNG key through a Mosaic TPU kernel (SMEM in, SMEM out) makes the lowering raise a bare "
    "StopIteration (docs/repros/pallas_tpu_key_through_smem.py)", platforms=("tpu",), stage="pallas_export",
    error="^StopIteration")
KEY_INTERPRET = Limitation(
    "finding: interpret mode refuses a typed PRNG key operand of a kernel ('NotImplementedError: key<fry>'; "
    "docs/repros/pallas_tpu_key_through_smem.py)", stage="lower", error="^NotImplementedError: key<fry>$")
#: The HLO interpreter (interpret=True) has no rule for the TPU's own PRNG; pltpu.InterpretParams is the
#: TPU interpreter, whose callbacks cannot be exported for other platforms (farm.catalog.pallas.interpreting).
PRNG_SEED_INTERPRET = Limitation(
    "the HLO interpreter has no rule for the TPU PRNG (prng_seed); only a TPU or pltpu.InterpretParams runs it",
    stage="lower", error="MLIR translation rule for primitive 'prng_seed' not found")


def _prng_key(interpret):  # noqa: ANN001, ANN202
    from jax.experimental.pallas import tpu as pltpu

    def kernel(key_ref, x_ref, o_ref, key_out_ref):
        key_out_ref[...] = key_ref[...]
        o_ref[...] = x_ref[...] + 1.0

    def f(key_data, x):
        key = jax.random.wrap_key_data(key_data)
        out, key_out = pl.pallas_call(
            kernel, out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(key.shape, key.dtype)),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=(pl.BlockSpec(memory_space=pltpu.VMEM), pl.BlockSpec(memory_space=pltpu.SMEM)),
            interpret=interpret)(key, x)
        return out, jax.random.key_data(key_out)
    return f


_KEY = CustomArg("key_data=threefry(3)", lambda r: np.asarray([0, 3], np.uint32), (2,), "uint32")
_harness("prng_key", _prng_key, [_KEY, RandArg(BLOCK, "float32")], lambda k, x: (x + 1.0, k), backends=TPU,
         params={"key": "in_and_out"}, limitations=[KEY_TPU_STOPITERATION, KEY_INTERPRET])


def _prng_seed(interpret):  # noqa: ANN001, ANN202
    """Bits from ``prng_seed``: the kernel lowers with the TPU's own PRNG ops; their values are the
    TPU's (no interpreter here computes them), so only the lowering is judged."""
    from jax.experimental.pallas import tpu as pltpu

    def kernel(seed_ref, o_ref):
        pltpu.prng_seed(seed_ref[0])
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)

    def f(seed):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(BLOCK, jnp.int32),
                              in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)], interpret=interpret)(seed)
    return f


define(FAMILY, "prng_key", _prng_seed(True),
       [CustomArg("seed=7", lambda r: np.asarray([7], np.int32), (1,), "int32")], dtype="int32", group=GROUP,
       params={"key": "prng_seed"}, catalog=CATALOG, compare="none", limitations=[PRNG_SEED_INTERPRET],
       pallas=Kernel(_prng_seed, TPU))


# ---- Mosaic TPU: every field of pltpu.CompilerParams ----

#: field -> (value, what the custom call's configuration then holds: {"<path>": value}). One harness
#: per field, so a field JAX drops fails alone. ``needs_layout_passes=False`` comes out True: JAX
#: documents the override ("TC kernels always require layout passes", ``tpu_custom_call``).
#: ``use_tc_tiling_on_sc`` is a SparseCore parameter: JAX refuses it for this TensorCore kernel.
TPU_PARAMS = {
    "dimension_semantics": (("parallel", "arbitrary"), {"body.dimension_semantics": [
        "#tpu.dimension_semantics<parallel>", "#tpu.dimension_semantics<arbitrary>"]}),
    "allow_input_fusion": ([True, False], {"custom_call_config.allow_input_fusion": [True, False]}),
    "vmem_limit_bytes": (48 * 2**20, {"scoped_memory_configs": [{"memory_space": 1, "offset": 0, "size": 48 * 2**20}]}),
    "has_side_effects": (True, {"has_side_effect": True}),
    "flags": ({"xla_tpu_farm_test_flag": 3}, {"flag_configs": [{"flag_type": "xla_tpu_farm_test_flag",
                                                              "value": {"integer_value": 3}}]}),
    "internal_scratch_in_bytes": (2**16, {"custom_call_config.internal_scratch_in_bytes": 2**16}),
    "disable_bounds_checks": (True, {"custom_call_config.disable_bounds_checks": True}),
    "disable_semaphore_checks": (True, {"custom_call_config.disable_semaphore_checks": True}),
    "skip_device_barrier": (True, {"custom_call_config.skip_device_barrier": True}),
    "shape_invariant_numerics": (False, {"custom_call_config.shape_invariant_numerics": False}),
    "needs_layout_passes": (False, {"custom_call_config.needs_layout_passes": True}),
    "serialization_format": (1, {"custom_call_config.serialization_format": 1}),
    "use_tc_tiling_on_sc": (True, {}),
}
#: The fields without a harness, and why (a field a new jax adds fails tests/test_pallas_features.py
#: until it is in one of the two tables).
TPU_PARAMS_LEFT_OUT = {
    "collective_id": "a collective kernel's barrier semaphore (a mesh of TPU devices); JAX refuses it without one",
    "allow_collective_id_without_custom_barrier": "the same collective kernel",
    "opt_level": "SparseCore (SC_*_SUBCORE) kernels only",
    "fuse_transposed_lhs_in_matmul": "a hint to the lowering of a transposed-lhs dot inside the kernel (none here)",
}
#: The fields an older jax's CompilerParams lacks: the jax versions that have them (jax 0.9.2 has
#: ``kernel_type`` instead, a field later versions dropped).
TPU_PARAMS_SINCE = {"needs_layout_passes": ">=0.10"}
#: JAX's own refusal of a SparseCore field for a TensorCore kernel.
TC_REFUSES_SC_TILING = Limitation("use_tc_tiling_on_sc is a SparseCore parameter: refused for TensorCore kernels",
                                  platforms=("tpu",), stage="pallas_export",
                                  error="use_tc_tiling_on_sc= is (not supported for TC kernels|only supported "
                                  "for SC_\\*_SUBCORE kernels)")


def _tpu_param(field, value, interpret):  # noqa: ANN001, ANN202
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    def f(x, y):
        grid = (x.shape[0] // 8, x.shape[1] // 128)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[_spec(), _spec()], out_specs=_spec(),
                              compiler_params=pltpu.CompilerParams(**{field: value}), interpret=interpret)(x, y)
    return f


for _field, (_value, _config) in TPU_PARAMS.items():
    _harness("tpu_params", functools.partial(_tpu_param, _field, _value),
             [RandArg((16, 256), "float32"), RandArg((16, 256), "float32")], lambda x, y: x + y, backends=TPU,
             params={"field": _field}, config={f"mosaic_tpu:{k}": v for k, v in _config.items()},
             needs={f"pltpu.CompilerParams({_field}=)": TPU_PARAMS_SINCE[_field]} if _field in TPU_PARAMS_SINCE else None,
             limitations=[TC_REFUSES_SC_TILING] if _field == "use_tc_tiling_on_sc" else ())


# ---- Triton: num_warps, num_stages ----

def _triton_param(values, interpret):  # noqa: ANN001, ANN202
    from jax.experimental.pallas import triton as pltriton

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3.0

    def f(x):
        grid = (x.shape[0] // 8, x.shape[1] // 128)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
                              in_specs=[_spec()], out_specs=_spec(),
                              compiler_params=pltriton.CompilerParams(**values), interpret=interpret)(x)
    return f


for _values in ({"num_warps": 2}, {"num_stages": 1}):
    _harness("triton_params", functools.partial(_triton_param, _values), _SMALL, lambda x: 3.0 * x,
             backends=TRITON, params=dict(_values), config={f"triton:{k}": v for k, v in _values.items()})


# ---- Triton: atomic_add ----

def _atomic_add(interpret):  # noqa: ANN001, ANN202
    from jax.experimental.pallas import triton as pltriton

    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
        pltriton.atomic_add(o_ref, (slice(None),), x_ref[...])

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((x.shape[1],), x.dtype), grid=(x.shape[0],),
                              in_specs=[pl.BlockSpec((None, x.shape[1]), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((x.shape[1],), lambda i: (0,)), interpret=interpret)(x)
    return f


_harness("atomic_add", _atomic_add, [RandArg((4, 128), "float32")], lambda x: x.sum(0), backends=TRITON,
         tol=(1e-5, 1e-5))


# ---- Mosaic TPU: pallas_export_experimental(dynamic_shapes=True) ----

def _dynamic_export(interpret):  # noqa: ANN001, ANN202
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
    return f


#: Finding (docs/repros/pallas_dynamic_export_dim_expression.py, jax 0.10.2 and 0.12.0.1): a dimension that
#: is an expression of its variable (8*r) is lost by the dynamic-shape export's map of dimensions.
DYNAMIC_DIM_EXPRESSION = Limitation(
    "finding: pallas_export_experimental(dynamic_shapes=True) cannot export a dimension that is an expression "
    "(8*r, 128*c), only bare variables (docs/repros/pallas_dynamic_export_dim_expression.py)", platforms=("tpu",),
    stage="pallas_export", error="Unable to find location of dimvar")

for _dims, _lims in (("r, c", ()), ("8*r, 128*c", (DYNAMIC_DIM_EXPRESSION,))):
    _harness("dynamic_export", _dynamic_export, [RandArg((16, 256), "float32")], lambda x: x + 1.0, backends=TPU,
             symbolic=(_dims,), params={"dims": _dims.replace(" ", "")}, dynamic_shapes=True, limitations=_lims)
