"""``pl.pallas_export_experimental(dynamic_shapes=True)`` exports a Mosaic TPU kernel over an
array of symbolic shape ``(r, c)``, but not over ``(8*r, 128*c)`` (the shape a TPU kernel's tiles
give): "ValueError: Unable to find location of dimvar c in dim_map {'8*r': ..., '128*c': ...}".
The map is keyed by each dimension's expression and searched by the variable's name, so any
dimension that is not a bare variable is lost (jax 0.12.0.1). Exits 1 while ``(8*r, 128*c)``
fails where ``(r, c)`` exports, 0 once both export.

Standalone (jax, jaxlib only; any host: the TPU is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def f(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


print("jax", jax.__version__)
if not hasattr(pl, "pallas_export_experimental"):
    print("this jax has no pl.pallas_export_experimental")
    sys.exit(0)
try:
    device = mesh_lib.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
except TypeError:  # an older jax's AbstractDevice has no platform
    device = mesh_lib.AbstractDevice(device_kind="TPU v5 lite", num_cores=1)
failed = {}
for spec in ("r, c", "8*r, 128*c"):
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("tpu",), abstract_device=device)), \
            pl.pallas_export_experimental(dynamic_shapes=True):
        try:
            export.export(jax.jit(f), platforms=("tpu",))(jax.ShapeDtypeStruct(export.symbolic_shape(spec), jnp.float32))
            print(f"({spec}): exported")
        except Exception as e:
            failed[spec] = f"{type(e).__name__}: {str(e)[:160]}"
            print(f"({spec}): {failed[spec]}")
sys.exit(1 if "8*r, 128*c" in failed and "r, c" not in failed else 0)
