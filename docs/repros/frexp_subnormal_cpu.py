"""XLA CPU, jax before 0.12: jnp.frexp of any float32 subnormal is (0.5, -149).

IEEE gives frexp(2**-140) = (0.5, -139); a backend that flushes subnormals to zero gives
(0, 0). jax 0.10.2 to 0.11.2 give (0.5, -149) for every subnormal, whose product
0.5 * 2**-149 is neither (jnp.frexp's subnormal path rescales the input by 2**23, which the
CPU flushes to 0, and reads that zero's bits). jax 0.12.0's Frexp primitive gives (0, 0).
Found by the api catalog's edge-value variants (jnp.frexp_float32_19_edge=x0, jax 0.10.2).
Exits 1 while the bug is there.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")
x = np.array([2.0**-149, 2.0**-140, 2.0**-127, -(2.0**-130)], np.float32)  # every one subnormal
m, e = (np.asarray(a) for a in jax.jit(jnp.frexp)(x))
im, ie = np.frexp(x)
print("jax", jax.__version__)
print("x          ", x)
print("jnp.frexp  ", m, e)
print("IEEE       ", im, ie)
ok = all((a == b and c == d) or (a == 0 and c == 0) for a, b, c, d in zip(m, im, e, ie))
print("ok" if ok else "BUG: neither the IEEE (mantissa, exponent) nor (0, 0) (flushed)")
sys.exit(0 if ok else 1)
