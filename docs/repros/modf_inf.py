"""jnp.modf(±inf) gives a NaN fractional part; NumPy (and C99's modf) give ±0.

jnp.modf computes the fractional part as x - trunc(x), and inf - inf is NaN. NumPy follows C:
modf(±inf) is (±0.0, ±inf). The integral part agrees. Found by a trial of the api catalog's
edge-value variants of jnp against their NumPy twin (the float64 evaluation of the jaxpr
computes the same x - trunc(x), so it agrees with JAX). Exits 1 while the fractional part of
an infinity is NaN.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

x = np.array([np.inf, -np.inf, 2.5], np.float32)
frac, whole = jax.jit(jnp.modf)(x)
want_frac, want_whole = np.modf(x)
print("jax", jax.__version__)
print("jnp.modf:", np.asarray(frac), np.asarray(whole))
print("np.modf: ", want_frac, want_whole)
if np.isnan(np.asarray(frac)[:2]).any():
    print("BUG: jnp.modf(±inf)'s fractional part is NaN (NumPy and C99: ±0.0)")
    sys.exit(1)
print("ok: jnp.modf(±inf) is (±0.0, ±inf)")
