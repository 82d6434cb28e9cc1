"""jax 0.12's cuda lowering of a multi-dimensional jnp.fft.irfft (irfft2, irfftn) first makes its
input Hermitian on every axis (``jax._src.lax.fft._symmetrize_irfft_input``: 0.5 * (s + conj(r))
over the DC and Nyquist slices), whose docstring says this leaves the result unchanged under
NumPy's convention. It does not at the edges:

- a DC term of ±3.4e38 (float32's largest): s + conj(s) overflows to inf before the halving, and
  the whole irfft2 output is inf/NaN where NumPy's (and the cpu lowering's) is finite;
- an infinite or NaN imaginary part of the DC term, which NumPy's irfft ignores: inf + (-inf) is
  NaN, and the output is NaN everywhere.

Found by the api catalog's edge rows of jnp.fft (docs/api.md): the cuda module run on XLA:CPU
(crossexec) differed from the cpu module; the rocm lowering keeps a 1-D real transform and does
not symmetrize; jax 0.10.2 has no such step (it decomposes into an IFFT and a 1-D IRFFT). The step
came with jax-ml/jax#40144 (fixing the speed issue #40143); no report of this regression found. Not run on a GPU here (no device lent). This script
needs only jax and numpy: it applies the symmetrization the cuda lowering inserts (on the CPU) and
compares NumPy's irfft2 of its output with NumPy's irfft2 of the input. Exits 1 while they differ.
"""
import sys

import jax
import numpy as np

jax.config.update("jax_platforms", "cpu")
try:
    from jax._src.lax.fft import _symmetrize_irfft_input
except ImportError:
    print("jax", jax.__version__, "has no _symmetrize_irfft_input (before 0.12): not affected")
    sys.exit(0)

rng = np.random.default_rng(0)
bad = 0
print("jax", jax.__version__)
for label, dc in [("DC = 3.4e38", complex(3.4028235e38, 0.0)), ("DC imaginary inf", complex(0.5, np.inf)),
                  ("DC imaginary NaN", complex(0.5, np.nan))]:
    x = (rng.standard_normal((6, 3)) + 1j * rng.standard_normal((6, 3))).astype(np.complex64)
    x[0, 0] = dc
    sym = np.asarray(jax.jit(lambda v: _symmetrize_irfft_input(v, fft_lengths=(6, 4)))(x))
    want, got = np.fft.irfft2(x, s=(6, 4)).astype(np.float32), np.fft.irfft2(sym, s=(6, 4)).astype(np.float32)
    ok = np.isfinite(got).all() == np.isfinite(want).all() and np.allclose(got, want, rtol=1e-4, atol=1e-3,
                                                                             equal_nan=True)
    bad += not ok
    print(f"{label}: NumPy irfft2 finite: {np.isfinite(want).all()}, after the cuda lowering's symmetrization: "
          f"{np.isfinite(got).all()}{'' if ok else '  <-- differs'}")
print("fixed" if not bad else f"{bad} of 3 still differ")
sys.exit(1 if bad else 0)
