"""jax 0.12.0.1's Mosaic GPU lowers ``lax.erf`` and ``lax.atan2`` (they have lowering rules, to
``math.erf`` and ``math.atan2``), but its layout inference has no rule for those ops: a
``plgpu.kernel`` applying either to an (8, 128) block fails with "No layout inference rule
defined for %N = math.erf ..." while ``lax.exp`` of the same block lowers. jax 0.10.2 lowered
both (``pl.pallas_call`` with Mosaic GPU): a rule each side of the pass that does not meet.
Exits 1 while either op fails that way, 0 once both lower or are refused by name.

Standalone (jax, jaxlib only; any host: the GPU is named by an abstract device).
"""
import sys

import jax
import jax.numpy as jnp
from jax import export, lax
from jax._src import mesh as mesh_lib
from jax.experimental import pallas as pl

try:
    from jax.experimental.pallas import mosaic_gpu as plgpu
    plgpu.kernel  # noqa: B018
except (ImportError, AttributeError):
    print(f"jax {jax.__version__}: no plgpu.kernel; nothing to check")
    sys.exit(0)

SPEC = pl.BlockSpec((8, 128), lambda i, j: (i, j))


def call(op):
    def f(x, y):
        def kernel(x_gmem, y_gmem, o_gmem):
            def step(_, x_smem, y_smem, o_smem):
                o_smem[...] = op(x_smem[...], y_smem[...])
            plgpu.emit_pipeline(step, grid=(2, 2), in_specs=[SPEC, SPEC], out_specs=[SPEC])(x_gmem, y_gmem, o_gmem)
        return plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)
    return f


def lower(op):
    device = mesh_lib.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="cuda")
    arg = jax.ShapeDtypeStruct((16, 256), jnp.float32)
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
        export.export(jax.jit(call(op)), platforms=("cuda",))(arg, arg)


lower(lambda x, y: lax.exp(x) + y)
print(f"jax {jax.__version__}: exp: lowers")
bad = False
for name, op in (("erf", lambda x, y: lax.erf(x) + y), ("atan2", lax.atan2)):
    try:
        lower(op)
        print(f"{name}: lowers")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        bad |= "No layout inference rule defined for" in str(e)
sys.exit(1 if bad else 0)
