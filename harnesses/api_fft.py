"""``jax.numpy.fft`` against ``numpy.fft`` in float64 (complex128)."""
from farm.catalog.api import declare, spec, without

C = dict(kind="custom", edge=False)
NORMS = ({}, {"norm": "ortho"}, {"norm": "forward"})
SPECS = [
    spec("fft", "real", shapes=(((7,),), ((2, 8),)),  # no empty case: numpy.fft refuses 0 points dtypes=("complex64", "float32"),
         variants=NORMS + ({"n": 5}, {"n": 9, "axis": 0}), **C),
    spec("ifft", "real", shapes=(((7,),), ((2, 8),)), dtypes=("complex64",), variants=NORMS + ({"n": 4},), **C),
    spec("fft2", "real", shapes=(((6, 5),), ((2, 4, 3),)), dtypes=("complex64",), variants=NORMS, **C),
    spec("ifft2", "real", shapes=(((6, 5),),), dtypes=("complex64",), variants=({}, {"s": (4, 4)}), **C),
    spec("fftn", "real", shapes=(((3, 4, 5),),), dtypes=("complex64",), variants=({}, {"axes": (0, 2)}), **C),
    spec("ifftn", "real", shapes=(((3, 4, 5),),), dtypes=("complex64",), variants=({}, {"s": (2, 3, 4)}), **C),
    spec("rfft", "real", shapes=(((7,),), ((3, 8),)), variants=NORMS + ({"n": 10},), **C),
    spec("irfft", "real", shapes=(((5,),), ((3, 4),)), dtypes=("complex64",), variants=({}, {"n": 9}, {"norm": "ortho"}),
         **C),
    spec("rfft2", "real", shapes=(((6, 5),),), variants=({}, {"norm": "ortho"}), **C),
    spec("irfft2", "real", shapes=(((6, 3),),), dtypes=("complex64",), variants=({}, {"s": (6, 5)}), **C),
    spec("rfftn", "real", shapes=(((3, 4, 5),),), variants=({}, {"axes": (0, 1)}), **C),
    spec("irfftn", "real", shapes=(((3, 4, 3),),), dtypes=("complex64",), variants=({}, {"s": (3, 4, 5)}), **C),
    spec("hfft", "real", shapes=(((5,),),), dtypes=("complex64",), variants=({}, {"n": 9}), **C),
    spec("ihfft", "real", shapes=(((7,),),), variants=({}, {"norm": "ortho"}), **C),
    spec("fftshift", "real", shapes=(((7,),), ((4, 5),)), variants=({}, {"axes": 0}), **C),
    spec("ifftshift", "real", shapes=(((4, 5),), ((7,),)), variants=({}, {"axes": 1}), **C),
    spec("fftfreq", shapes=(((1,),),), call=lambda f, x, **kw: f(7, **kw), variants=({}, {"d": 0.5}), **C),
    spec("rfftfreq", shapes=(((1,),),), call=lambda f, x, **kw: f(8, **kw), variants=({}, {"d": 0.1}), **C),
]
declare("jnp.fft", SPECS)
without("jnp.fft", {})
