"""A typed PRNG key passed through a Mosaic TPU kernel (in SMEM, copied to an SMEM output)
makes the TPU lowering raise a bare ``StopIteration`` (no message: a generator ran dry inside
the lowering), and interpret mode refuses it with ``NotImplementedError: key<fry>``; the same
kernel without the key lowers and runs (jax 0.12.0.1). Exits 1 while the lowering raises
``StopIteration``, 0 once it lowers or refuses with an error that says why.

Standalone (jax, jaxlib only; any host: the TPU is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(key_ref, x_ref, o_ref, key_out_ref):
    key_out_ref[...] = key_ref[...]
    o_ref[...] = x_ref[...] + 1.0


def f(key, x, interpret=False):
    return pl.pallas_call(
        kernel, out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(key.shape, key.dtype)),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=(pl.BlockSpec(memory_space=pltpu.VMEM), pl.BlockSpec(memory_space=pltpu.SMEM)),
        interpret=interpret)(key, x)


print("jax", jax.__version__)
key, x = jax.random.key(3), jnp.zeros((8, 128), jnp.float32)
try:
    jax.jit(lambda k, x: f(k, x, True))(key, x)
    print("interpret mode: runs")
except Exception as e:
    print(f"interpret mode: {type(e).__name__}: {str(e)[:160]}")
try:
    device = mesh_lib.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
except TypeError:  # an older jax's AbstractDevice has no platform
    device = mesh_lib.AbstractDevice(device_kind="TPU v5 lite", num_cores=1)
with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("tpu",), abstract_device=device)):
    try:
        export.export(jax.jit(f), platforms=("tpu",))(jax.ShapeDtypeStruct(key.shape, key.dtype),
                                                       jax.ShapeDtypeStruct(x.shape, x.dtype))
        print("tpu lowering: exported")
    except StopIteration as e:
        print(f"tpu lowering: StopIteration {e!r}")
        sys.exit(1)
    except Exception as e:
        print(f"tpu lowering: {type(e).__name__}: {str(e)[:160]}")
