"""Interpret mode cannot run a kernel over a named grid: ``pl.pallas_call(..., grid=(("rows", 2),
("cols", 2)))`` whose body reads its position with ``lax.axis_index("rows")`` lowers for Mosaic TPU
and for Triton, but ``interpret=True`` (JAX's HLO interpreter, the way to run a kernel on a CPU)
fails to lower it: "Found an unbound axis name: rows. To fix this, please call axis_index under
`jax.shard_map`." (jax 0.10.2 and 0.12.0.1). Exits 1 while interpret mode fails or gives other
numbers than the grid position, 0 once it computes them.

Standalone (jax, jaxlib only; any host).
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 10.0 * jax.lax.axis_index("rows") + jax.lax.axis_index("cols")


def f(x):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(("rows", 2), ("cols", 2)), in_specs=[spec], out_specs=spec, interpret=True)(x)


print("jax", jax.__version__)
want = 10.0 * (np.arange(16)[:, None] // 8) + (np.arange(256)[None, :] // 128)
try:
    got = np.asarray(jax.jit(f)(jnp.zeros((16, 256), jnp.float32)))
except Exception as e:
    print("interpret mode:", type(e).__name__, str(e).splitlines()[0])
    sys.exit(1)
ok = np.array_equal(got, want)
print("interpret mode computes the grid positions" if ok else "interpret mode gives other numbers")
sys.exit(0 if ok else 1)
