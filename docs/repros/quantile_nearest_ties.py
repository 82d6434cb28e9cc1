"""jnp.quantile(method="nearest") breaks an index tie toward the lower index; NumPy toward the even one.

For n values and quantile q the fractional index is q*(n-1); at .5 NumPy (2.x) takes the
even neighbour (round half to even), jnp always the lower (jax/_src/numpy/reductions.py:
`pred = high_weight <= 0.5`). jnp.quantile's docstring does not say it differs. NumPy's own
docstring formula says "lower" too and its code does not (numpy/numpy#28910): the two
libraries disagree, and which one is right is NumPy's call. Found by the api catalog
(jnp.quantile_float32_7x3_axis=-1_method=nearest_q=0.75_v=nearest). Exits 1 while they differ.
"""
import sys

import jax.numpy as jnp
import numpy as np

x = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
for q in (0.375, 0.625):  # index 1.5 and 2.5: ties
    print(f"q={q}: numpy {np.quantile(x, q, method='nearest')}  jnp {float(jnp.quantile(x, q, method='nearest'))}")
differ = float(jnp.quantile(x, 0.375, method="nearest")) != np.quantile(x, 0.375, method="nearest")
print("BUG: jnp and NumPy break the tie differently" if differ else "ok")
sys.exit(1 if differ else 0)
