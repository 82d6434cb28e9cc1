"""The derivative of jnp.linalg.det of a 0x0 matrix (det = 1) raises IndexError: the JVP rule
indexes the empty LU factorization. Exits 1 where it raises, 0 where it works."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

print("jax", jax.__version__)
a = np.zeros((0, 0), np.float32)
print("det of 0x0:", float(jnp.linalg.det(a)))
try:
    print("jvp:", jax.jvp(jnp.linalg.det, (a,), (a,)))
    print("grad:", jax.grad(jnp.linalg.det)(a).shape)
except IndexError as e:
    print(f"{type(e).__name__}: {e}")
    sys.exit(1)
