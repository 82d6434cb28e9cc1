"""``jax.scipy.signal`` against ``scipy.signal`` in float64."""
from farm.catalog import Limitation
from farm.catalog.api import declare, spec, without

C = dict(kind="custom", edge=False)
BOUNDARY = Limitation("jax.scipy.signal.convolve2d: only boundary='fill' (its docstring)", stage="trace",
                      error="NotImplementedError: convolve2d.. only supports boundary='fill'")
MODES = ({}, {"mode": "same"}, {"mode": "valid"})
SPECS = [
    spec("convolve", "real", "real", shapes=(((9,), (4,)), ((5, 6), (2, 3))), variants=MODES, **C),
    spec("convolve", "real", "real", shapes=(((9,), (4,)),), tag="fft", variants=({"method": "fft"},), **C),
    spec("correlate", "real", "real", shapes=(((9,), (4,)), ((5, 6), (2, 3))), variants=MODES, **C),
    spec("convolve2d", "real", "real", shapes=(((5, 6), (2, 3)),), variants=MODES, **C),
    # a documented deviation: jax.scipy.signal.convolve2d supports boundary='fill' only (its docstring)
    spec("convolve2d", "real", "real", shapes=(((5, 6), (2, 3)),), tag="boundary",
         variants=({"boundary": "wrap"}, {"boundary": "symm", "mode": "same"}), limitations=(BOUNDARY,), **C),
    spec("correlate2d", "real", "real", shapes=(((5, 6), (2, 3)),), variants=MODES, **C),
    spec("fftconvolve", "real", "real", shapes=(((9,), (4,)), ((5, 6), (2, 3))), variants=MODES, **C),
    spec("detrend", "real", shapes=(((9,),), ((3, 8),)), variants=({}, {"type": "constant"}, {"axis": 0}), **C),
    spec("welch", "real", shapes=(((64,),),), variants=({"nperseg": 16}, {"nperseg": 16, "scaling": "spectrum"},
                                                       {"nperseg": 16, "detrend": False}), **C),
    spec("csd", "real", "real", shapes=(((64,), (64,)),), variants=({"nperseg": 16}, {"nperseg": 16, "average": "mean"}),
         **C),
    spec("stft", "real", shapes=(((64,),),), variants=({"nperseg": 16}, {"nperseg": 16, "boundary": None}), **C),
    spec("istft", "real", shapes=(((9, 9),),), dtypes=("complex64",), variants=({"nperseg": 16},), **C),
]
declare("scipy.signal", SPECS)
without("scipy.signal", {})
