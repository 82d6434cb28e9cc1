"""Pallas TPU lowering depends on the TPU generation the *exporting* process sees, and the
artifact does not say which (jax 0.10.2; docs/findings.md, docs/pallas.md).

Standalone: jax, jaxlib and numpy only. Run on any host (here: a CPU host). Exits 1 while
the hazard is there, 0 once the artifact records the generation or the kernel is the same.

1. On a host without a TPU, lowering a kernel that uses ``jnp.sign`` "for tpu" asks the
   *default device* what chip it is, and fails: "Unsupported TPU device kind: cpu".
2. An abstract mesh with an ``AbstractDevice`` names the chip; then it lowers. But the
   bfloat16 kernel is different for TPU v3 and TPU v4 (``_sign_lowering_rule`` takes a 16-bit
   path from v4 on), while both artifacts say only ``platforms=('tpu',)``: an artifact exported
   on a v4+ host and run on an older chip carries the other chip's kernel, and nothing in it
   can tell.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl


def kernel(x_ref, o_ref):
    o_ref[...] = jnp.sign(x_ref[...])


def f(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


x = jax.ShapeDtypeStruct((16, 128), jnp.bfloat16)
try:
    export.export(jax.jit(f), platforms=("tpu",))(x)
    print("1. exported for tpu from this host without naming a chip")
except ValueError as e:
    print(f"1. {jax.devices()[0].platform} host, no chip named: {type(e).__name__}: {e}")


def exported_for(device_kind):
    device = mesh_lib.AbstractDevice(device_kind=device_kind, num_cores=1, platform="tpu")
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        return export.export(jax.jit(f), platforms=("tpu",))(x)


v3, v4 = exported_for("TPU v3"), exported_for("TPU v4")
same = bytes(v3.mlir_module_serialized) == bytes(v4.mlir_module_serialized)
print(f"2. TPU v3 artifact: platforms={v3.platforms}; TPU v4 artifact: platforms={v4.platforms}; "
      f"same module: {same}")
np.testing.assert_equal(v3.platforms, v4.platforms)
sys.exit(0 if same else 1)
