"""Mosaic GPU's lowering of ``lax.rem`` of floats inside a Pallas kernel crashes with a Python
``TypeError: unsupported operand type(s) for %: 'FragmentedArray' and 'FragmentedArray'``
instead of lowering or refusing with ``NotImplementedError`` (jax 0.10.2, ``pl.pallas_call`` with
``jax_pallas_use_mosaic_gpu``; int32 rem lowers). jax 0.12 has no Mosaic GPU lowering for
``pl.pallas_call`` (nothing to run there: exits 0 saying so), but its Mosaic GPU lowering rule is
still ``lax.rem_p: x % y`` and ``FragmentedArray.__mod__`` still returns ``NotImplemented`` for a
float element type, so a ``plgpu.kernel`` doing it should meet the same TypeError (not run here). Exits 1 while the TypeError is
there, 0 once float rem lowers or is refused cleanly.

Standalone (jax, jaxlib only; any host: the GPU is named by an abstract device). Run it with
the jax 0.10.2 venv: ``~/.cache/lowering-farm/jax-envs/jax-0.10.2/bin/python``.
"""
import sys

import jax
import jax.numpy as jnp
from jax import export, lax
from jax._src import config
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl

if not hasattr(config, "jax_pallas_use_mosaic_gpu"):
    print(f"jax {jax.__version__}: pl.pallas_call has no Mosaic GPU lowering; nothing to check")
    sys.exit(0)


def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = lax.rem(x_ref[...], y_ref[...])


def f(x, y):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 2),
                          in_specs=[spec, spec], out_specs=spec)(x, y)


def lower(dtype):
    device = mesh_lib.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="cuda")
    arg = jax.ShapeDtypeStruct((16, 256), dtype)
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        with config.jax_pallas_use_mosaic_gpu(True):
            export.export(jax.jit(f), platforms=("cuda",))(arg, arg)


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
