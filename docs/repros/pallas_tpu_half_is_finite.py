"""Mosaic TPU lowers ``lax.is_finite`` of a bfloat16 (or float16) block inside a Pallas kernel to
a ``tpu.weird`` that its own verifier rejects: "Pallas encountered an internal verification
error. Please file a bug ... 'tpu.weird' op Input type must be F32" (jax 0.12.0.1, every TPU
generation). float32 lowers. Exits 1 while the lowering fails that way, 0 once it lowers or
refuses with a plain NotImplementedError.

Standalone (jax, jaxlib only; any host: the TPU generation is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export, lax
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl


def kernel(x_ref, o_ref):
    o_ref[...] = lax.is_finite(x_ref[...])


def f(x):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.bool_), grid=(2, 2),
                          in_specs=[spec], out_specs=spec)(x)


def lower(dtype, kind="TPU v6 lite"):
    device = mesh_lib.AbstractDevice(device_kind=kind, num_cores=1, platform="tpu")
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        export.export(jax.jit(f), platforms=("tpu",))(jax.ShapeDtypeStruct((16, 256), dtype))


lower(jnp.float32)
print("float32 is_finite: lowers")
bad = False
for dtype in (jnp.bfloat16, jnp.float16):
    try:
        lower(dtype)
        print(f"{jnp.dtype(dtype).name} is_finite: lowers")
    except Exception as e:  # noqa: BLE001
        print(f"{jnp.dtype(dtype).name} is_finite: {type(e).__name__}: {str(e)[:300]}")
        bad |= "verification error" in str(e)
sys.exit(1 if bad else 0)
