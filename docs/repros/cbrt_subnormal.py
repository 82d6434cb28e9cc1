"""XLA CPU: jnp.cbrt of a float32 (or bfloat16) subnormal is -5.6e-16 whatever the input.

IEEE gives cbrt(1.4e-45) = 1.1e-15; a backend that flushes subnormals to zero gives 0.
XLA's CPU backend gives -5.5951735e-16 for every subnormal, positive or negative: the
wrong sign and neither answer. Found by the api catalog's edge-value variants
(jnp.cbrt_float32_19_edge=x0). Exits 1 while the bug is there.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")
x = np.array([1.4e-45, 1e-42, 1e-40, 1.1e-38, -1.4e-45], np.float32)  # every one subnormal
got = np.asarray(jax.jit(jnp.cbrt)(x))
ieee = np.cbrt(x.astype(np.float64)).astype(np.float32)
print("x        ", x)
print("jnp.cbrt ", got)
print("IEEE     ", ieee)
ok = all(g == i or g == 0.0 for g, i in zip(got, ieee))  # the IEEE root, or the flushed input's (0)
print("ok" if ok else "BUG: neither the IEEE cube root nor 0 (flushed)")
sys.exit(0 if ok else 1)
