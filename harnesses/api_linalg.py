"""``jax.numpy.linalg`` against ``numpy.linalg`` and ``jax.scipy.linalg`` against
``scipy.linalg``, in float64. A decomposition whose factors are not unique (signs of
eigenvectors, Q and R, U and V) is judged by what is: its eigenvalues or singular values,
or the product of its factors (``q @ r``), computed by the same ``call`` on both sides."""
import numpy as np

from farm.catalog import Limitation
from farm.catalog.api import EIG, declare, lib, spec, without

SQ = (4, 4)
C = dict(kind="custom", edge=False)
#: A matrix function's edge variant too (``farm.catalog.api._edge_matrices``: a batch of matrices, a
#: special value at [0, 0] of each, then a zero, a singular, a huge and a tiny one), against the twin.
M = dict(C, edge_matrices=True)
#: An SVD with its vectors (LAPACK's gesdd: svd, pinv, lstsq) never returns for a matrix holding
#: ±inf, in JAX and in NumPy before 2.5 alike: gesdd's rescaling turns inf into NaN and bdsqr then
#: loops (Reference-LAPACK/lapack#1409, numpy/numpy#32591; docs/findings.md). A hang is a timeout no
#: limitation can expect, so their edge matrices withhold ±inf; docs/repros/svd_inf_hang.py keeps it.
SVD_HANG = dict(M, edge_withheld=(np.inf, -np.inf))
#: tpu's pinv and lstsq lowering (JAX's own SVD, not LAPACK) does not scale the matrix first: for the
#: edge batch's matrix scaled by 2**-66 its squares fall below float32's smallest normal and are
#: flushed where crossexec runs it (XLA:CPU flushes subnormals; TPUs do too, not verified on one
#: here), and the answer is off by its own size. The cpu part (LAPACK) is right.
TPU_SVD_TINY = Limitation("tpu's SVD lowering has no scaling: a matrix of entries near 2**-66 forms squares "
                          "below float32's smallest normal, flushed where crossexec runs it", platforms=("tpu",),
                          stage="crossexec", status="fail", error="elements differ")
#: jax.scipy.linalg.schur and hessenberg (and what is built on schur: funm, sqrtm, solve_sylvester)
#: have a CPU lowering only (their docstrings: "only implemented on CPU"; on cuda, rocm and tpu
#: lowering raises NotImplementedError: no MLIR translation rule).
CPU_ONLY = (Limitation("schur/hessenberg: CPU only (no lowering rule for cuda, rocm, tpu)",
                       platforms=("cuda", "rocm", "tpu"), stage="lower", error="NotImplementedError"),)
#: Found by this catalog under --vjp (docs/repros/det_empty_grad.py): the derivative of det of a
#: 0x0 matrix (det = 1, derivative an empty matrix) raises in its JVP rule, jax 0.5.3 to 0.12.0.1.
DET_EMPTY_GRAD = Limitation("jnp.linalg.det of a 0x0 matrix cannot be differentiated: its JVP rule indexes the empty "
                            "LU factorization (IndexError; docs/findings.md)", platforms=("export",), stage="vjp",
                            status="error", error=r"IndexError: index is out of bounds for axis 0 with size 0")
#: JAX's documented contract, not a bug: solve(assume_a="pos") differentiates through A's matvec (a general
#: A: custom_linear_solve), while the Cholesky factorization it runs reads one triangle. Along symmetric
#: directions the two agree; finite differences move A along a random, non-symmetric one. (The cuda and
#: rocm pullbacks call cusolver/hipsolver: not runnable on the CPU that runs every vjp module.)
SOLVE_POS_GRAD = Limitation("jax.scipy.linalg.solve(assume_a='pos'): JAX's derivative treats A as general "
                            "(custom_linear_solve's matvec), the Cholesky solve reads one triangle: they differ along "
                            "non-symmetric directions", platforms=("cpu", "tpu"), stage="vjp", status="fail",
                            error=r"finite differences of the float64 reference")
#: A product of computed factors (q @ r, u s vh, z t z^T) is off by about n * eps * ||A||
#: (backward stability), above float32's default 1e-6 absolute for these 4x4 matrices of norm ~8.
FACTORS = (1e-4, 1e-5)
#: the platforms the census data below names (farm.catalog.api.chlo_limitations: measured on jax 0.12.0.1)
ALL = "cpu,cuda,rocm,tpu"


def _sorted_eigvals(f, a):
    return lib(f).sort_complex(f(a))


def _eig(f, a):
    return lib(f).sort_complex(f(a)[0])


def _eigh(f, a, **kw):
    w, v = f(a, **kw)
    return w, (v * w[..., None, :]) @ lib(f).swapaxes(v, -1, -2).conj()


def _qr(f, a, **kw):
    q, r = f(a, **kw)
    return q @ r


def _svd(f, a):
    u, s, vh = f(a, full_matrices=False)
    return s, (u * s[..., None, :]) @ vh


def _lstsq(f, a, b):
    return f(a, b, rcond=None)[0]


NUMPY = [
    spec("cholesky", "spd", shapes=((SQ,), ((2, 3, 3),)), dtypes=("float32", "complex64"), **M),
    spec("cond", "matrix", shapes=((SQ,),), variants=({}, {"p": "fro"}, {"p": 1}), **M),
    spec("cross", "real", "real", shapes=(((5, 3), (5, 3)),), **C),
    spec("det", "matrix", shapes=((SQ,), ((2, 3, 3),), ((0, 0),)), dtypes=("float32", "complex64"),
         case_limitations=(("s2", DET_EMPTY_GRAD),), **M),
    spec("diagonal", shapes=(((3, 4),),), **C),
    spec("eig", "matrix", shapes=((SQ,),), call=_eig, limitations=EIG, **M),
    spec("eigvals", "matrix", shapes=((SQ,),), call=_sorted_eigvals, limitations=EIG, **M),
    spec("eigh", "spd", shapes=((SQ,), ((2, 3, 3),)), call=_eigh, tol=FACTORS, dtypes=("float32", "complex64"), **M),
    spec("eigvalsh", "spd", shapes=((SQ,),), variants=({}, {"UPLO": "U"}), **M),
    spec("inv", "matrix", shapes=((SQ,), ((2, 3, 3),)), dtypes=("float32", "complex64"), **M),
    spec("lstsq", "matrix", "real", shapes=((((6, 4)), (6,)), ((6, 4), (6, 2))), call=_lstsq,
         edge_limitations=(("matrices", TPU_SVD_TINY),), **SVD_HANG),
    spec("matmul", "real", "real", shapes=(((2, 3, 4), (4, 5)),), **C),
    spec("matrix_norm", "real", shapes=(((3, 4),),), variants=({}, {"ord": "nuc"}, {"ord": 1}, {"ord": np.inf},
                                                             {"ord": 2}, {"ord": -2}), **M),
    spec("matrix_power", "matrix", shapes=((SQ,),), variants=({"n": 3}, {"n": 0}, {"n": -2}), **M),
    spec("matrix_rank", "real", shapes=(((4, 6),),), **M),
    spec("matrix_transpose", shapes=(((2, 3, 4),),), **C),
    spec("multi_dot", "real", "real", "real", shapes=(((3, 4), (4, 5), (5, 2)),),
         call=lambda f, a, b, c: f([a, b, c]), **C),
    spec("norm", "real", shapes=(((6,),), ((3, 4),)), variants=({}, {"ord": 1}, {"ord": np.inf}, {"ord": -np.inf},
                                                           {"ord": 0}, {"ord": 3}), **M),
    spec("norm", "real", shapes=(((3, 4),),), tag="matrix", variants=({"ord": "fro"}, {"ord": "nuc"}, {"ord": -1},
                                                                       {"ord": 2}, {"axis": 1}), **M),
    spec("outer", "real", "real", shapes=(((5,), (4,)),), **C),
    spec("pinv", "real", shapes=(((5, 3),), ((3, 5),)), edge_limitations=(("matrices", TPU_SVD_TINY),), **SVD_HANG),
    spec("qr", "real", shapes=(((5, 3),), ((3, 5),)), call=_qr, tol=FACTORS, variants=({}, {"mode": "complete"}), **M),
    spec("qr", "real", shapes=(((5, 3),),), tag="r", call=lambda f, a: lib(f).abs(f(a, mode="r")), **M),
    spec("slogdet", "matrix", shapes=((SQ,), ((2, 3, 3),)), **M),
    spec("solve", "matrix", "real", shapes=((SQ, (4,)), (SQ, (4, 2)), ((2, 4, 4), (2, 4, 1))),
         dtypes=("float32", "complex64"), **M),
    spec("svd", "matrix", shapes=(((5, 3),), ((2, 3, 4),)), call=_svd, tol=FACTORS, **SVD_HANG),
    spec("svd", "real", shapes=(((5, 3),),), tag="values", call=lambda f, a: f(a, compute_uv=False), **M),
    spec("svdvals", "real", shapes=(((5, 3),),), **M),
    spec("tensordot", "real", "real", shapes=(((2, 3, 4), (3, 4, 2)),), **C),
    spec("tensorinv", "matrix", shapes=(((6, 2, 3),),), call=lambda f, a: f(a.reshape(6, 6).reshape(6, 2, 3), ind=1),
         **C),
    spec("tensorsolve", "matrix", "real", shapes=(((6, 2, 3), (6,)),), **C),
    spec("trace", "real", shapes=(((3, 4),), ((2, 3, 3),)), **C),
    spec("vecdot", "real", "real", shapes=(((3, 4), (3, 4)),), **C),
    spec("vector_norm", "real", shapes=(((3, 4),),), variants=({}, {"ord": 1}, {"ord": np.inf}, {"axis": 0},
                                                             {"ord": 0}), **C),
]
#: On jax 0.10.2 (measured there: scripts/census_table.py) complex det has no chlo.square: no chlo op at all.
declare("jnp.linalg", NUMPY, chlo={"det/complex64": f"{ALL}: square"}, chlo_on={"~=0.10.2": {}})
without("jnp.linalg", {})


def _cho(f, a, **kw):
    c = f(a, **kw)[0]
    return lib(f).triu(c) if not kw.get("lower") else lib(f).tril(c)


def _cho_solve(f, a, b):
    return f((lib(f).linalg.cholesky(a), True), b)


def _lu_solve(f, a, b):
    import scipy.linalg as sl
    factor = (sl if f.__module__.startswith("scipy") else __import__("jax.scipy.linalg").scipy.linalg).lu_factor
    return f(factor(a), b)


def _lu(f, a):
    p, l, u = f(a)
    return p @ l @ u, l, u


def _schur(f, a):
    t, z = f(a)
    return z @ t @ z.T


def _hess(f, a):
    h, q = f(a, calc_q=True)
    return q @ h @ q.T


def _funm(f, a):
    return f(a, lib(f).sin)


SCIPY = [
    spec("block_diag", "real", "real", shapes=(((2, 3), (3, 2)),), **C),
    spec("cho_factor", "spd", shapes=((SQ,),), call=_cho, variants=({}, {"lower": True}), **M),
    spec("cho_solve", "spd", "real", shapes=((SQ, (4, 2)),), call=_cho_solve, **M),
    spec("cholesky", "spd", shapes=((SQ,),), variants=({}, {"lower": True}), **M),
    spec("circulant", "real", shapes=(((5,),),), **C),
    spec("companion", "nonzero", shapes=(((5,),),), **C),
    spec("convolution_matrix", "real", shapes=(((4,),),), variants=({"n": 5}, {"n": 5, "mode": "same"},
                                                               {"n": 6, "mode": "valid"}), **C),
    spec("det", "matrix", shapes=((SQ,),), **M),
    spec("dft", shapes=(((1,),),), call=lambda f, x, **kw: f(5, **kw), variants=({}, {"scale": "n"}),
         dtypes=("float32",), **C),
    spec("eigh", "spd", shapes=((SQ,),), call=_eigh, tol=FACTORS, variants=({}, {"lower": False}), **M),
    spec("eigh", "spd", shapes=((SQ,),), tag="values", call=lambda f, a: f(a, eigvals_only=True), **M),
    # tol: its compare's band against SciPy, for its symbolic calls' float64-jaxpr judge too (a float32
    # bisection's eigenvalue 3.5e-6 off at b = 3)
    spec("eigh_tridiagonal", "real", "real", shapes=(((5,), (4,)),), call=lambda f, d, e: f(d, e, eigvals_only=True),
         tol=(2e-5, 1e-6), **C),
    spec("expm", "small", shapes=((SQ,), ((2, 3, 3),)), **M),
    spec("expm_frechet", "small", "small", shapes=((SQ, SQ),), **C),
    spec("fiedler", "real", shapes=(((5,),),), **C),
    spec("fiedler_companion", "nonzero", shapes=(((5,),),), **C),
    spec("funm", "small", shapes=((SQ,),), call=_funm, limitations=CPU_ONLY, **M),
    spec("hadamard", shapes=(((1,),),), call=lambda f, x: f(8), **C),
    spec("hankel", "real", "real", shapes=(((4,), (3,)),), **C),
    spec("helmert", shapes=(((1,),),), call=lambda f, x, **kw: f(5, **kw), variants=({}, {"full": True}), **C),
    spec("hessenberg", "matrix", shapes=((SQ,),), call=_hess, tol=FACTORS, limitations=CPU_ONLY, **M),
    spec("hilbert", shapes=(((1,),),), call=lambda f, x: f(5), **C),
    spec("inv", "matrix", shapes=((SQ,),), **M),
    spec("invhilbert", shapes=(((1,),),), call=lambda f, x: f(4), **C),
    spec("invpascal", shapes=(((1,),),), call=lambda f, x, **kw: f(4, **kw), variants=({}, {"kind": "lower"}), **C),
    spec("leslie", "positive", "prob", shapes=(((4,), (3,)),), **C),
    spec("lu", "matrix", shapes=((SQ,),), call=_lu, tol=FACTORS, **M),
    spec("lu_factor", "matrix", shapes=((SQ,),), **M),
    spec("lu_solve", "matrix", "real", shapes=((SQ, (4, 2)),), call=_lu_solve, **M),
    spec("pascal", shapes=(((1,),),), call=lambda f, x, **kw: f(5, **kw), variants=({}, {"kind": "upper"}), **C),
    spec("polar", "matrix", shapes=((SQ,),), **M),
    spec("qr", "real", shapes=(((5, 3),),), call=_qr, tol=FACTORS, variants=({}, {"mode": "economic"}), **M),
    spec("schur", "matrix", shapes=((SQ,),), call=_schur, tol=FACTORS, limitations=CPU_ONLY, **M),
    spec("solve", "matrix", "real", shapes=((SQ, (4, 2)),), variants=({}, {"assume_a": "gen"}), **M),
    spec("solve", "spd", "real", shapes=((SQ, (4, 2)),), tag="spd", variants=({"assume_a": "pos"},),
         limitations=(SOLVE_POS_GRAD,), **M),
    spec("solve", "spd", "real", shapes=((SQ, (4, 2)),), tag="spd", variants=({"assume_a": "sym"},), **M),
    spec("solve_sylvester", "matrix", "matrix", "real", shapes=(((3, 3), (2, 2), (3, 2)),), limitations=CPU_ONLY, **C),
    spec("solve_triangular", "matrix", "real", shapes=((SQ, (4, 2)),),
         variants=({}, {"lower": True}, {"trans": 1}, {"unit_diagonal": True}), **M),
    spec("sqrtm", "spd", shapes=((SQ,),), limitations=CPU_ONLY, **M),
    spec("svd", "real", shapes=(((5, 3),),), tag="values", call=lambda f, a: f(a, compute_uv=False), **M),
    spec("svd", "matrix", shapes=(((5, 3),),), call=_svd, tol=FACTORS, **SVD_HANG),
    spec("toeplitz", "real", "real", shapes=(((4,), (3,)),), **C),
]
SCIPY_CHLO = {"eigh_tridiagonal": f"{ALL}: square", "funm": "cpu: square", "solve_sylvester": "cpu: square"}
#: jax 0.10.2's census (measured there: scripts/census_table.py): funm and solve_sylvester without
#: chlo.square, the Pascal and Hilbert matrices built with chlo.lgamma.
SCIPY_CHLO_0_10_2 = {"funm": "", "solve_sylvester": "", **dict.fromkeys(("invhilbert", "invpascal", "pascal"), f"{ALL}: lgamma")}
declare("scipy.linalg", SCIPY, chlo=SCIPY_CHLO, chlo_on={"~=0.10.2": SCIPY_CHLO | SCIPY_CHLO_0_10_2})
without("scipy.linalg", {
    "qr_multiply": "Q's signs are not unique and the product keeps them; no sign-free reduction specified yet",
    "rsf2csf": "the complex Schur form is not unique (a unitary diagonal's phases); not yet specified",
})
