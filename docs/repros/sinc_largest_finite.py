"""jax before 0.12: jnp.sinc of the largest finite float32 (and bfloat16) is NaN.

sinc(x) = sin(pi x) / (pi x) is about -7.7e-40 at x = 3.4028235e38 (float64), a float32
subnormal, so 0 is right too on a backend that flushes subnormals. jax 0.10.2 to 0.11.2
compute pi * x in the input's dtype, which overflows to inf, and sin(inf) / inf is NaN.
jax 0.12.0's range-reduced sinc gives a finite value. Found by the api catalog's
edge-value variants (jnp.sinc_float32_21_edge=x0, jax 0.10.2). Exits 1 while the bug is there.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")
ok = True
for dt in (np.float32, jnp.bfloat16):
    x = np.array([np.finfo(dt).max, -np.finfo(dt).max, 1e30], dt)
    got = np.asarray(jax.jit(jnp.sinc)(x)).astype(np.float64)
    ref = np.sinc(x.astype(np.float64))
    print("jax", jax.__version__, np.dtype(dt).name, "x", x, "jnp.sinc", got, "float64", ref)
    ok &= bool(np.all(np.abs(got - ref) <= 1e-30))  # the true value is below 1e-30 in magnitude
print("ok" if ok else "BUG: jnp.sinc is not within 1e-30 of its float64 value (NaN: pi * x overflowed)")
sys.exit(0 if ok else 1)
