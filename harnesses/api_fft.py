"""``jax.numpy.fft`` against ``numpy.fft`` in float64 (complex128)."""
from farm.catalog import Limitation
from farm.catalog.api import declare, spec, without

C = dict(kind="custom", edge=False)
#: The transforms over trailing axes also get an edge-value variant (``farm.catalog.api._edge_rows``:
#: a batch of rows, one special value a row, judged against numpy.fft). The n-dimensional ones
#: transform every axis by default, so one non-finite value reaches every output: their rows would
#: not be independent (they lower to the same stablehlo.fft as fft2's, over more axes).
E = dict(kind="custom", edge=False, edge_rows=True)
#: Found by irfft2's edge rows (docs/findings.md): jax 0.12's cuda lowering of a multi-dimensional
#: irfft symmetrizes its input first (0.5 * (s + conj(r))), which overflows at a DC term of ±3.4e38 and
#: turns an ignored infinite or NaN imaginary DC part into NaN: the cuda module, run here, is inf/NaN
#: where the cpu module and NumPy are finite. rocm keeps a 1-D real transform. The step came with
#: jax-ml/jax#40144 (no report of this regression found).
IRFFT_CUDA_SYMMETRIZE = Limitation(
    "finding: jax 0.12's cuda lowering of a multi-dimensional irfft symmetrizes its input (0.5 * (s + conj(r))), "
    "which overflows at a DC term of 3.4e38 and makes an ignored inf/NaN imaginary DC part NaN "
    "(docs/repros/irfft2_cuda_symmetrize.py)", platforms=("cuda",), stage="crossexec", error="elements differ",
    jax=">=0.12")
NORMS = ({}, {"norm": "ortho"}, {"norm": "forward"})
SPECS = [
    spec("fft", "real", shapes=(((7,),), ((2, 8),)),  # no empty case: numpy.fft refuses 0 points dtypes=("complex64", "float32"),
         variants=NORMS + ({"n": 5}, {"n": 9, "axis": 0}), **E),
    spec("ifft", "real", shapes=(((7,),), ((2, 8),)), dtypes=("complex64",), variants=NORMS + ({"n": 4},), **E),
    spec("fft2", "real", shapes=(((6, 5),), ((2, 4, 3),)), dtypes=("complex64",), variants=NORMS, **E),
    spec("ifft2", "real", shapes=(((6, 5),),), dtypes=("complex64",), variants=({}, {"s": (4, 4)}), **E),
    spec("fftn", "real", shapes=(((3, 4, 5),),), dtypes=("complex64",), variants=({}, {"axes": (0, 2)}), **C),
    spec("ifftn", "real", shapes=(((3, 4, 5),),), dtypes=("complex64",), variants=({}, {"s": (2, 3, 4)}), **C),
    spec("rfft", "real", shapes=(((7,),), ((3, 8),)), variants=NORMS + ({"n": 10},), **E),
    spec("irfft", "real", shapes=(((5,),), ((3, 4),)), dtypes=("complex64",), variants=({}, {"n": 9}, {"norm": "ortho"}),
         **E),
    spec("rfft2", "real", shapes=(((6, 5),),), variants=({}, {"norm": "ortho"}), **E),
    spec("irfft2", "real", shapes=(((6, 3),),), dtypes=("complex64",), variants=({}, {"s": (6, 5)}),
         edge_limitations=(("rows", IRFFT_CUDA_SYMMETRIZE),), **E),
    spec("rfftn", "real", shapes=(((3, 4, 5),),), variants=({}, {"axes": (0, 1)}), **C),
    spec("irfftn", "real", shapes=(((3, 4, 3),),), dtypes=("complex64",), variants=({}, {"s": (3, 4, 5)}), **C),
    spec("hfft", "real", shapes=(((5,),),), dtypes=("complex64",), variants=({}, {"n": 9}), **E),
    spec("ihfft", "real", shapes=(((7,),),), variants=({}, {"norm": "ortho"}), **E),
    spec("fftshift", "real", shapes=(((7,),), ((4, 5),)), variants=({}, {"axes": 0}), **E),
    spec("ifftshift", "real", shapes=(((4, 5),), ((7,),)), variants=({}, {"axes": 1}), **E),
    spec("fftfreq", shapes=(((1,),),), call=lambda f, x, **kw: f(7, **kw), variants=({}, {"d": 0.5}), **C),
    spec("rfftfreq", shapes=(((1,),),), call=lambda f, x, **kw: f(8, **kw), variants=({}, {"d": 0.1}), **C),
]
declare("jnp.fft", SPECS)
without("jnp.fft", {})
