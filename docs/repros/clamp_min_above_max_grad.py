"""lax.clamp(min, x, max) with min > max returns max (XLA's clamp is min(max(x, min), max)), but
its derivatives with respect to min, x and max are all 0 there: JAX's JVP rules assume
min <= max, so the derivative with respect to max, which is 1, is lost. jnp.clip, built from
maximum and minimum, gives 1. Exits 1 where it fails, 0 where it works."""
import sys

import jax
import jax.numpy as jnp
from jax import lax

print("jax", jax.__version__)
mn, x, mx = 2.0, 0.0, 1.0
value = float(lax.clamp(mn, x, mx))
d_min, d_x, d_max = (float(g) for g in jax.grad(lambda a, b, c: lax.clamp(a, b, c), argnums=(0, 1, 2))(mn, x, mx))
d_clip = float(jax.grad(lambda c: jnp.clip(x, mn, c))(mx))
print(f"lax.clamp({mn}, {x}, {mx}) = {value}  (max)")
print(f"d/dmin = {d_min}, d/dx = {d_x}, d/dmax = {d_max}  (d/dmax should be 1)")
print(f"jnp.clip({x}, {mn}, {mx}) d/dmax = {d_clip}")
sys.exit(0 if value == mx and d_max == 1.0 else 1)
