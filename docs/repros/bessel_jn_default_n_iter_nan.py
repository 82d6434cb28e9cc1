"""jax.scipy.special.bessel_jn(z, v=3) is NaN in float32 for |z| <= 2 with the default n_iter=50.

bessel_jn computes J_0..J_v by backward recurrence from order n_iter. From order 50 at a
small |z| the recurrence grows past float32's range (inf / inf = NaN); SciPy's jv gives
J_0(1) = 0.765. The docstring asks for the smallest n_iter that satisfies its rule of
thumb, but the default is 50 whatever z is, and nothing warns. Found by the api catalog
(scipy.special.bessel_jn_float32_9). Exits 1 while the default gives NaN at ordinary z.
"""
import sys

import jax.scipy.special as jss
import numpy as np
import scipy.special as sp

z = np.array([0.5, 1.0, 2.0, 5.0], np.float32)
got = np.asarray(jss.bessel_jn(z, v=3))
want = np.stack([sp.jv(k, z.astype(np.float64)) for k in range(4)])
print("z        ", z)
print("jax J_0  ", got[0])
print("scipy J_0", want[0].astype(np.float32))
bad = bool(np.isnan(got).any())
print("BUG: NaN at ordinary arguments with the default n_iter" if bad else "ok")
sys.exit(1 if bad else 0)
