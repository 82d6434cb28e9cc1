"""jax.nn.squareplus(x) is inf for x < -1.8e19 in float32 (and NaN at -inf), where it tends to 0.

squareplus(x) = (x + sqrt(x**2 + b)) / 2 with b = 4 goes to 0 as x -> -inf (it is about
b / (4|x|) there) and to x as x -> +inf. jax.nn.squareplus evaluates the formula as written:
x**2 overflows to inf for |x| > sqrt(float32 max) ~ 1.8e19, and then x + inf = inf, so a
large negative input gives inf instead of ~0 (and -inf gives NaN). The float64 evaluation
of the same formula (and mpmath) give 1e-20 for x = -1e20. Found by the api catalog's edge
values (nn.squareplus_float32_19_edge=x0). Exits 1 while the bug is there.
"""
import sys

import jax
import numpy as np

x = np.array([-1e20, -3.4e38], np.float32)
got = np.asarray(jax.jit(jax.nn.squareplus)(x))
xd = x.astype(np.float64)
want = (2.0 / (np.sqrt(xd * xd + 4.0) - xd))  # the same function, written without cancellation
print("x              ", x)
print("jax.nn         ", got)
print("float64 (exact)", want.astype(np.float32))
bad = not np.all(np.isfinite(got))
print("BUG: inf where squareplus is about 1e-20" if bad else "ok")
sys.exit(1 if bad else 0)
