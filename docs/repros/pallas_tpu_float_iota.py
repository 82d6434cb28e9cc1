"""Mosaic TPU lowers a float32 ``lax.broadcasted_iota`` inside a Pallas kernel to a ``tpu.iota``
whose result type its own verifier rejects: "Pallas encountered an internal verification error.
Please file a bug ... 'tpu.iota' op result #0 must be vector of integer or index values, but got
'vector<8x128xf32>'" (jax 0.12.0.1). An int32 iota lowers. Exits 1 while the lowering fails
that way, 0 once it lowers or refuses with a plain NotImplementedError.

Standalone (jax, jaxlib only; any host: the TPU generation is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export, lax
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + lax.broadcasted_iota(x_ref.dtype, x_ref.shape, 0)


def f(x):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 2),
                          in_specs=[spec], out_specs=spec)(x)


def lower(dtype):
    device = mesh_lib.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        export.export(jax.jit(f), platforms=("tpu",))(jax.ShapeDtypeStruct((16, 256), dtype))


lower(jnp.int32)
print("int32 iota: lowers")
try:
    lower(jnp.float32)
except Exception as e:  # noqa: BLE001
    print(f"float32 iota: {type(e).__name__}: {str(e)[:300]}")
    sys.exit(1 if "verification error" in str(e) else 0)
print("float32 iota: lowers")
