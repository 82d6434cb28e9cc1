"""Mosaic GPU's lowering of ``lax.rem`` of floats inside a Pallas kernel crashes with a Python
``TypeError: unsupported operand type(s) for %: 'FragmentedArray' and 'FragmentedArray'``
instead of lowering or refusing with ``NotImplementedError``: its rule is ``x % y`` and
``FragmentedArray.__mod__`` returns ``NotImplemented`` for a float element type. int32 rem
lowers. Seen on jax 0.10.2 (``pl.pallas_call`` with ``jax_pallas_use_mosaic_gpu``) and jax
0.12.0.1 (which has no such switch: the same kernel body in ``plgpu.kernel`` over
``plgpu.emit_pipeline``). Exits 1 while the TypeError is there, 0 once float rem lowers or is
refused cleanly.

Standalone (jax, jaxlib only; any host: the GPU is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export, lax
from jax._src import config
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl

SWITCH = hasattr(config, "jax_pallas_use_mosaic_gpu")
SPEC = pl.BlockSpec((8, 128), lambda i, j: (i, j))


def body(x, y):
    return lax.rem(x, y)


def with_pallas_call(x, y):  # jax <= 0.11: a plain pallas_call, lowered with Mosaic GPU when told
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = body(x_ref[...], y_ref[...])
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 2),
                          in_specs=[SPEC, SPEC], out_specs=SPEC)(x, y)


def with_plgpu_kernel(x, y):  # jax 0.12: the same body over the same blocks, written for Mosaic GPU
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def kernel(x_gmem, y_gmem, o_gmem):
        def step(_, x_smem, y_smem, o_smem):
            o_smem[...] = body(x_smem[...], y_smem[...])
        plgpu.emit_pipeline(step, grid=(2, 2), in_specs=[SPEC, SPEC], out_specs=[SPEC])(x_gmem, y_gmem, o_gmem)
    return plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def lower(dtype):
    device = mesh_lib.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="cuda")
    arg = jax.ShapeDtypeStruct((16, 256), dtype)
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        if SWITCH:
            with config.jax_pallas_use_mosaic_gpu(True):
                export.export(jax.jit(with_pallas_call), platforms=("cuda",))(arg, arg)
        else:
            export.export(jax.jit(with_plgpu_kernel), platforms=("cuda",))(arg, arg)


print(f"jax {jax.__version__}: {'pl.pallas_call with Mosaic GPU' if SWITCH else 'plgpu.kernel'}")
lower(jnp.int32)
print("int32 rem: lowers")
try:
    lower(jnp.float32)
except TypeError as e:
    print(f"float32 rem: TypeError: {e}")
    sys.exit(1)
except NotImplementedError as e:
    print(f"float32 rem: refused: {e}")
    sys.exit(0)
print("float32 rem: lowers")
