"""Mosaic GPU refuses a bool (i1) block with a message that contradicts itself: a comparison's
(8, 128) bool result in a Pallas kernel fails with "memref<8x128xi1, ...> must have a number of
elements that is a multiple of 128 (got 1024)" (jax 0.10.2, ``pl.pallas_call`` with
``jax_pallas_use_mosaic_gpu``). ``FragmentedArray.load_strided`` raises it whenever
``WGStridedFragLayout.from_shaped_type`` returns None, which it does for a 1-bit element type
whatever the count; the same code is in jax 0.12's ``fragmented_array.py``. The float32 ->
int32 version of the same kernel lowers. jax 0.12 has no Mosaic GPU lowering for
``pl.pallas_call`` (exits 0 saying so). Exits 1 while the message names an element count that
is a multiple of 128, 0 once the block lowers or the message is another.

Standalone (jax, jaxlib only; any host: the GPU is named by an abstract device). Run it with
the jax 0.10.2 venv: ``~/.cache/lowering-farm/jax-envs/jax-0.10.2/bin/python``.
"""
import re
import sys

import jax
import jax.numpy as jnp
from jax import export
from jax._src import config
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl

if not hasattr(config, "jax_pallas_use_mosaic_gpu"):
    print(f"jax {jax.__version__}: pl.pallas_call has no Mosaic GPU lowering; nothing to check")
    sys.exit(0)


def call(out_dtype):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = (x_ref[...] < y_ref[...]).astype(out_dtype)

    def f(x, y):
        spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, out_dtype), grid=(2, 2),
                              in_specs=[spec, spec], out_specs=spec)(x, y)
    return f


def lower(out_dtype):
    device = mesh_lib.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="cuda")
    arg = jax.ShapeDtypeStruct((16, 256), jnp.float32)
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        with config.jax_pallas_use_mosaic_gpu(True):
            export.export(jax.jit(call(out_dtype)), platforms=("cuda",))(arg, arg)


lower(jnp.int32)
print("x < y as int32: lowers")
try:
    lower(jnp.bool_)
except ValueError as e:
    print(f"x < y as bool: ValueError: {str(e)[:300]}")
    m = re.search(r"multiple of (\d+) \(got (\d+)\)", str(e))
    sys.exit(1 if m and int(m.group(2)) % int(m.group(1)) == 0 else 0)
print("x < y as bool: lowers")
