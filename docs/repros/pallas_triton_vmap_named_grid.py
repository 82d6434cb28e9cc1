"""``jax.vmap`` of a ``pallas_call`` over a named grid no longer lowers for Triton: jax 0.12.0.1
raises ``IndexError: list index out of range`` in the Triton lowering's
``_program_id_lowering_rule``, where jax 0.10.2 lowers it. The same kernel unbatched lowers on
both, and batched it lowers for Mosaic TPU. Exits 1 while the batched lowering fails, 0 once it
lowers.

Standalone (jax, jaxlib only; any host: the GPU is named by an abstract device).
"""
import sys
import traceback

import jax
import jax.numpy as jnp
from jax import export
from jax._src import config as jax_config
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 10.0 * jax.lax.axis_index("rows") + jax.lax.axis_index("cols")


def f(x):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(("rows", 2), ("cols", 2)), in_specs=[spec], out_specs=spec)(x)


print("jax", jax.__version__)
try:
    device = mesh_lib.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="cuda")
except TypeError:  # an older jax's AbstractDevice has no platform
    device = mesh_lib.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132)
jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("gpu",), abstract_device=device)).__enter__()
if hasattr(jax_config, "jax_pallas_use_mosaic_gpu"):  # jax 0.10-0.11: Triton, not Mosaic GPU
    jax_config.jax_pallas_use_mosaic_gpu(False).__enter__()
checks = [export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]
export.export(jax.jit(f), platforms=("cuda",), disabled_checks=checks)(jax.ShapeDtypeStruct((16, 256), jnp.float32))
print("unbatched: lowers for cuda (Triton)")
try:
    export.export(jax.jit(jax.vmap(f)), platforms=("cuda",), disabled_checks=checks)(
        jax.ShapeDtypeStruct((2, 16, 256), jnp.float32))
except Exception as e:
    where = traceback.extract_tb(e.__traceback__)[-1]
    print(f"vmapped: {type(e).__name__}: {str(e)[:200]} (at {where.filename.split('site-packages/')[-1]}:"
          f"{where.lineno} {where.name})")
    sys.exit(1)
print("vmapped: lowers for cuda (Triton)")
