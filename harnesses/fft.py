"""lax.fft: FFT/IFFT on complex, RFFT on real, IRFFT on complex, in 1-D and 2-D,
against numpy.fft in float64."""
import numpy as np
from jax import lax

from farm.catalog import RandArg, define

FAMILY = "fft"
TOL32 = (2e-5, 2e-5)

KINDS = {
    # primitive: (FftType name, input dtypes, numpy 1-D / n-D references)
    "fft": ("FFT", ("complex64", "complex128"), np.fft.fft, np.fft.fftn),
    "ifft": ("IFFT", ("complex64", "complex128"), np.fft.ifft, np.fft.ifftn),
    "rfft": ("RFFT", ("float32", "float64"), np.fft.rfft, np.fft.rfftn),
    "irfft": ("IRFFT", ("complex64", "complex128"), np.fft.irfft, np.fft.irfftn),
}
LENGTHS = {1: (8,), 2: (4, 8)}

for prim, (kind, dtypes, ref1, refn) in KINDS.items():
    fft_type = getattr(lax.FftType, kind)
    for dt in dtypes:
        for ndim, lengths in LENGTHS.items():
            shape = (3,) + lengths
            if prim == "irfft":  # input holds lengths[-1] // 2 + 1 frequencies
                shape = (3,) + lengths[:-1] + (lengths[-1] // 2 + 1,)
            axes = tuple(range(-ndim, 0))
            ref = (lambda x, r=ref1, n=lengths[-1]: r(x, n=n)) if ndim == 1 else \
                  (lambda x, r=refn, s=lengths, a=axes: r(x, s=s, axes=a))
            define(FAMILY, prim, lambda x, t=fft_type, n=lengths: lax.fft(x, t, n), [RandArg(shape, dt)],
                   dtype=dt, params={"lengths": "x".join(map(str, lengths))}, reference=ref,
                   tol=TOL32 if dt in ("float32", "complex64") else (1e-12, 1e-12))
