"""jax.scipy.special.hyp2f1(a, b, c, z) is 1 for a NaN z (float32 and float64): a NaN argument
gives a number. scipy.special.hyp2f1 gives NaN. (hyp1f1 does the same for a NaN a or b:
docs/repros/hyp1f1_negative_x.py.) Found by the api catalog's edge-value variants judged
against scipy.special (docs/api.md). No upstream report found. Needs only jax and numpy.
Exits 1 while it is not NaN, 0 once fixed.
"""
import sys

import jax
import jax.scipy.special as jsp
import numpy as np

jax.config.update("jax_platforms", "cpu")
got = float(jax.jit(jsp.hyp2f1)(*(np.float32(v) for v in (0.25, 0.25, 0.25, np.nan))))
print("jax", jax.__version__, "hyp2f1(0.25, 0.25, 0.25, nan) =", got)
print("fixed" if np.isnan(got) else "BUG: a NaN z gives a number")
sys.exit(0 if np.isnan(got) else 1)
