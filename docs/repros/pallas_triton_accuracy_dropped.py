"""The Pallas Triton lowering drops ``accuracy=`` without a word: ``lax.exp(x, accuracy=...)``
inside a kernel lowers for cuda to the very same Triton IR as ``lax.exp(x)`` (its dispatch
tables take the primitive's parameters as ``**_``), whatever accuracy was asked for, while
Mosaic TPU refuses the parameter ("Not implemented: accuracy") and XLA honours it outside
Pallas (jax 0.12.0.1). Exits 1 while an ``AccuracyMode.HIGHEST`` kernel's payload is byte for
byte the default one's, 0 once it differs or the lowering refuses.

Standalone (jax, jaxlib only; any host: the GPU is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export, lax
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl

TRITON = "__gpu$xla.gpu.triton"


def call(accuracy):
    def kernel(x_ref, o_ref):
        o_ref[...] = lax.exp(x_ref[...], accuracy=accuracy)

    def f(x):
        spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 2),
                              in_specs=[spec], out_specs=spec)(x)
    return f


def module(accuracy):
    device = mesh_lib.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="cuda")
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        exp = export.export(jax.jit(call(accuracy)), platforms=("cuda",),
                            disabled_checks=[export.DisabledSafetyCheck.custom_call(TRITON)]
                            )(jax.ShapeDtypeStruct((16, 256), jnp.float32))
    return exp.mlir_module()


# one call site for all three (a module's locations name the line that traced it)
modes = {"default": None, "HIGHEST": lax.AccuracyMode.HIGHEST, "Tolerance(ulps=1)": lax.Tolerance(ulps=1)}
modules = {}
for name, accuracy in modes.items():
    try:
        modules[name] = module(accuracy)
    except Exception as e:  # noqa: BLE001
        print(f"accuracy={name} refused: {type(e).__name__}: {e}")
        sys.exit(0)
assert TRITON in modules["default"], "not a Triton kernel"
same = len(set(modules.values())) == 1
print(f"Triton modules for exp(x) with accuracy {', '.join(modes)}: {'identical' if same else 'different'}")
sys.exit(1 if same else 0)
