"""Mosaic TPU lowers a bfloat16 x bfloat16 ``lax.dot_general`` whose result is bfloat16 (no
``preferred_element_type``, as ``x @ y`` is) inside a Pallas kernel to a ``tpu.matmul`` with a
bfloat16 accumulator, which its own verifier rejects: "Pallas encountered an internal
verification error. Please file a bug ... 'tpu.matmul' op Expected matmul acc to be 32-bit"
(jax 0.12.0.1, every TPU generation). With ``preferred_element_type=jnp.float32`` it lowers.
Exits 1 while the lowering fails that way, 0 once it lowers or refuses with a plain
NotImplementedError.

Standalone (jax, jaxlib only; any host: the TPU generation is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export, lax
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl


def call(acc):
    def kernel(a_ref, b_ref, o_ref):
        o_ref[...] = lax.dot_general(a_ref[...], b_ref[...], (((1,), (0,)), ((), ())),
                                     preferred_element_type=acc)

    def f(a, b):
        out = acc or a.dtype
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 256), out), grid=(2, 2),
                              in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
                                        pl.BlockSpec((128, 128), lambda i, j: (0, j))],
                              out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)))(a, b)
    return f


def lower(acc):
    device = mesh_lib.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    args = (jax.ShapeDtypeStruct((16, 128), jnp.bfloat16), jax.ShapeDtypeStruct((128, 256), jnp.bfloat16))
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        export.export(jax.jit(call(acc)), platforms=("tpu",))(*args)


lower(jnp.float32)
print("bfloat16 dot, float32 result: lowers")
try:
    lower(None)
except Exception as e:  # noqa: BLE001
    print(f"bfloat16 dot, bfloat16 result: {type(e).__name__}: {str(e)[:300]}")
    sys.exit(1 if "verification error" in str(e) else 0)
print("bfloat16 dot, bfloat16 result: lowers")
