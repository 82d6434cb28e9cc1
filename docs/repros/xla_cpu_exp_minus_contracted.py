"""XLA:CPU, float32: an exp fused with a subtraction loses its overflow to inf.

- jax.jit(lambda x, y: jnp.exp(x) - y) at x >= 88.8 (where exp(x) overflows to inf), x = +inf
  included, with y = 1e38 gives 2.6757954e38 where IEEE float32 gives inf: as if exp's own last
  step were contracted with the subtraction (an FMA), exposing a clamp of x near 88.8;
- jax.jit(lambda x: x - jnp.exp(x)) at x = +inf is +inf where IEEE gives NaN (inf - inf), and
  exp(x) - x is -inf; for arrays of two or more elements (a one-element array gives NaN on 0.12);
- so whether a program gets that fusion decides its answer: a symbolic-shape export of
  jax.scipy.stats.gumbel_r.logpdf gives +inf at x = -inf, the static export and jax.jit NaN
  (the true value is -inf). The farm's api catalog found it that way (its symbolic calls of the
  gumbel edge variants against the static lowering, docs/symbolic.md).

jax 0.9.2, 0.10.2 and 0.12.0.1 alike. Related, not the same: openxla/xla#41579 (FMA contraction of
a*x + b*x, open). No upstream report of this one found. Needs only jax and numpy. Exits 1 while any
case is wrong, 0 once fixed.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax.scipy.stats import gumbel_r

jax.config.update("jax_platforms", "cpu")
print("jax", jax.__version__)
bad = 0
inf = np.float32(np.inf)

x = np.array([88.8, 89.0, 1000.0, np.inf], np.float32)
got = np.asarray(jax.jit(lambda x, y: jnp.exp(x) - y)(x, np.full_like(x, 1e38)))
print("exp(x) - 1e38 at", x, "->", got, "(float32: inf)")
bad += int(not np.all(np.isposinf(got[1:])))  # exp(89) alone is already above float32's largest

x = np.array([inf, inf], np.float32)
for name, f in (("x - exp(x)", lambda x: x - jnp.exp(x)), ("exp(x) - x", lambda x: jnp.exp(x) - x)):
    got = np.asarray(jax.jit(f)(x))
    print(f"{name} at +inf -> {got} (IEEE: nan)")
    bad += int(not np.all(np.isnan(got)))

x = np.array([-np.inf, 1.0], np.float32)
n, = export.symbolic_shape("n")
symbolic = np.asarray(export.export(jax.jit(gumbel_r.logpdf))(jax.ShapeDtypeStruct((n,), np.float32)).call(x))
static = np.asarray(export.export(jax.jit(gumbel_r.logpdf))(jax.ShapeDtypeStruct(x.shape, np.float32)).call(x))
print(f"gumbel_r.logpdf(-inf): symbolic export {symbolic[0]}, static export {static[0]} (true: -inf)")
bad += int(not np.array_equal(symbolic, static, equal_nan=True))
sys.exit(1 if bad else 0)
