"""Linear algebra: cholesky, qr, svd, eigh, eig, lu, triangular_solve,
tridiagonal_solve. Results that are not unique (signs, phases, orderings) are checked
with invariants (reconstruction and orthogonality errors relative to the input norm),
natively and when another platform's module runs on the host (crossexec); the rest
against NumPy in float64. Known gaps are Limitations: LAPACK has no f16/bf16 kernels,
eig has GPU/TPU gaps, some GPU kernels cannot be exported, and TPU's eigh is only
float32-accurate. GPU/TPU solver custom calls (cusolver_*, hipsolver_*, LuDecomposition)
have no host handler: their crossexec is not_runnable_here, not a limitation.
"""
import numpy as np
from jax import lax
from jax.lax import linalg

from farm.catalog import COMPLEX, CustomArg, Limitation, define, np_dtype

FAMILY = "linalg"
N = 4
DTYPES = ("bfloat16", "float16", "float32", "float64", "complex64", "complex128")

NO_HALF_ON_CPU = Limitation("LAPACK has no bf16/f16 kernels: lowering for cpu raises 'Unsupported dtype'",
                            platforms=("cpu",), dtypes=("bfloat16", "float16"), stage="lower")
#: jax 0.12 refuses half-precision linalg where 0.10.2 took it (docs/versions.md).
HALF_REFUSED = Limitation("jax 0.12 linalg takes float32, float64 and complex inputs only: tracing a bf16/f16 one "
                          "raises 'does not accept dtype'", dtypes=("bfloat16", "float16"), stage="trace",
                          error="does not accept dtype", jax=">=0.12")
#: Invariant errors of f32-class results are about 1e-6 of the input norm.
TOL = {"float32": (2e-5, 2e-5), "complex64": (2e-5, 2e-5), "float64": (1e-12, 1e-12),
       "complex128": (1e-12, 1e-12), "bfloat16": (5e-2, 5e-2), "float16": (5e-3, 5e-3)}


def _matrix(dt: str, shape=(N, N), kind: str = "general"):
    def make(rng: np.random.Generator) -> np.ndarray:
        a = rng.standard_normal(shape)
        if dt in COMPLEX:
            a = a + 1j * rng.standard_normal(shape)
        if kind == "spd":
            a = a @ np.conj(a.swapaxes(-1, -2)) + shape[-1] * np.eye(shape[-1])
        elif kind == "hermitian":
            a = (a + np.conj(a.swapaxes(-1, -2))) / 2
        elif kind == "lower":
            a = np.tril(a) + 3 * np.eye(shape[-1])
        return a.astype(np_dtype(dt))
    return CustomArg(f"{kind}_matrix", make, shape, dt)


def _rel(err: np.ndarray, a: np.ndarray) -> float:
    return float(np.linalg.norm(err) / max(np.linalg.norm(a), 1e-30))


def _eye_err(q: np.ndarray) -> float:
    qh = np.conj(q.swapaxes(-1, -2)) @ q
    return float(np.linalg.norm(qh - np.eye(qh.shape[-1])))


def _qr_invariant(a, q, r):
    q, r = q.astype(a.dtype), r.astype(a.dtype)
    return max(_rel(q @ r - a, a), _eye_err(q), float(np.abs(np.tril(r, -1)).max(initial=0)))


def _svd_invariant(a, u, s, vh):
    s, u, vh = s.astype(np.float64), u.astype(a.dtype), vh.astype(a.dtype)
    return max(_rel((u * s[..., None, :]) @ vh - a, a), _eye_err(u), _eye_err(np.conj(vh.swapaxes(-1, -2))),
               _rel(s - np.linalg.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False)))


def _eigh_invariant(a, v, w):
    v, w = v.astype(a.dtype), w.astype(np.float64)
    return max(_rel(a @ v - v * w[..., None, :], a), _eye_err(v), _rel(w - np.linalg.eigvalsh(a), a))


def _eig_invariant(a, w, vl, vr):
    w, vr = w.astype(np.complex128), vr.astype(np.complex128)
    return _rel(a @ vr - vr * w[..., None, :], a)


def _lu_invariant(a, lu, pivots, perm):
    lu = lu.astype(a.dtype)
    l = np.tril(lu, -1) + np.eye(a.shape[-1])
    u = np.triu(lu)
    return _rel(a[..., perm, :] - l @ u, a)


def _tridiagonal(dt: str, which: str):
    def make(rng: np.random.Generator) -> np.ndarray:
        v = rng.uniform(0.5, 1.0, (2, N))
        if which == "d":
            v = v + 4.0  # diagonally dominant
        if which == "dl":
            v[:, 0] = 0
        if which == "du":
            v[:, -1] = 0
        if dt in COMPLEX:
            v = v + 0.25j * rng.uniform(-1, 1, v.shape)
        return v.astype(np_dtype(dt))
    return CustomArg(f"tridiagonal_{which}", make, (2, N), dt)


def _tridiagonal_ref(dl, d, du, b):
    out = []
    for k in range(d.shape[0]):
        m = np.diag(d[k]) + np.diag(dl[k, 1:], -1) + np.diag(du[k, :-1], 1)
        out.append(np.linalg.solve(m, b[k]))
    return np.stack(out)


#: JAX has no eig lowering rule for TPU; the GPU eig kernels have no bf16/f16 either.
EIG_TPU = Limitation("no eig lowering for tpu", platforms=("tpu",), stage="lower")
EIG_HALF_GPU = Limitation("cuda/rocm eig kernels: 'Unsupported dtype' for bf16/f16", platforms=("cuda", "rocm"),
                          dtypes=("bfloat16", "float16"), stage="lower")
#: jax.export refuses custom calls without a compatibility guarantee; the export is redone
#: without these platforms (the artifact records them as dropped_platforms).
EIG_GPU_EXPORT = Limitation("cuda/rocm eig lowers to cuhybrid_eig_*/hiphybrid_eig_* (MAGMA or LAPACK on the "
                            "host), custom calls without a compatibility guarantee: jax.export refuses them",
                            platforms=("cuda", "rocm"), stage="export")
GTSV2_ROCM_EXPORT = Limitation("rocm tridiagonal_solve lowers to hipsparse_gtsv2_ffi, which has no compatibility "
                               "guarantee (cuda's cusparse_gtsv2_ffi has one): jax.export refuses it",
                               platforms=("rocm",), stage="export")
#: jax/_src/tpu/linalg/eigh.py lowers eigh (and the eigh inside TPU's QDWH svd) to the
#: Eigh custom call with backend_config "lower,sort,100,1e-6": a Jacobi tolerance of 1e-6
#: whatever the dtype. Run here, 64-bit results have exact eigen/singular values and
#: orthonormal vectors, but reconstruct only to ~5e-9 (eigh, svd f64) and ~6e-7 (svd c128).
EIGH_TPU_TOL = Limitation("tpu eigh is Jacobi with a fixed tolerance 1e-6 for every dtype (Eigh custom call): "
                          "64-bit eigenvectors reconstruct to ~5e-9, not ~1e-15",
                          platforms=("tpu",), dtypes=("float64", "complex128"), stage="compare", tol=(1e-8, 1e-8))
SVD_TPU_TOL = Limitation("tpu svd is QDWH + eigh, whose Jacobi has a fixed tolerance 1e-6 for every dtype (Eigh "
                         "custom call): 64-bit reconstruction ~5e-9 (float64), ~6e-7 (complex128)",
                         platforms=("tpu",), dtypes=("float64", "complex128"), stage="compare", tol=(2e-7, 2e-7))
#: The TPU SVD lowering of complex inputs emits chlo.conj (census, JAX #15608).
SVD_TPU_CONJ = Limitation("tpu svd of complex lowers to chlo.conj, which crosses the plugin boundary (JAX #15608)",
                          platforms=("tpu",), dtypes=COMPLEX, stage="census")
#: Symbolic matrix dimensions (``--shapes symbolic``): the tpu lowerings refuse them, which
#: sinks the four-platform export (cpu, cuda and rocm export; jax-notes: 20 of JAX's own
#: shape_poly harnesses fail this way). Not for bf16/f16: the cpu cannot lower those (LAPACK),
#: so their variant keeps concrete matrix dimensions, which tpu takes.
CPU_LOWERS = tuple(d for d in DTYPES if d not in ("bfloat16", "float16"))
EIGH_TPU_SYMBOLIC = Limitation("the tpu eigh lowering takes symbolic batch dimensions only ('Shape polymorphism for "
                               "native lowering for eigh is implemented only for the batch dimensions')",
                               platforms=("tpu",), dtypes=CPU_LOWERS, stage="symbolic_export", status="error",
                               error="implemented only for the batch dimensions")
SVD_TPU_SYMBOLIC = Limitation("the tpu svd lowering (QDWH) needs concrete matrix dimensions: 'Abstract tracer value "
                              "encountered where concrete value is expected'", platforms=("tpu",), dtypes=CPU_LOWERS,
                              stage="symbolic_export", status="error", error="concrete value is expected")
GTSV_TPU_SYMBOLIC = Limitation("the tpu tridiagonal_solve lowering blocks the system by 32: with a symbolic n its "
                               "slice of a floordiv(n - 1, 32) block array is refused (jax 0.5.3: its comparison "
                               "with 1 is inconclusive)", platforms=("tpu",), dtypes=CPU_LOWERS,
                               stage="symbolic_export", status="error",
                               error=r"slice_sizes must be less than or equal to operand shape"
                                     r"|comparison 'floordiv\(d\d* - 1, 32\)' >= '1' is inconclusive")
#: jax before 0.6.2 lowered tridiagonal_solve for cuda/rocm through jaxlib's GPU plugin module
#: (``gpu_sparse.gtsv2_*_buffer_size``, None without the plugin: cross-lowering fails) and only
#: for float32/float64; its symbolic lowering multiplied an int by an MLIR value. 0.6.2 replaced
#: that path (the strings are gone from jax-v0.6.2's sources; 0.9.2 lowers all of them here).
GTSV_GPU_OLD = [Limitation("jax < 0.6.2 lowers tridiagonal_solve for cuda/rocm through the GPU plugin's module (absent "
                           "here) and only in float32/float64", platforms=("cuda", "rocm"), stage=stage,
                           status="error", error=r"only implemented for float32 and float64 on GPU|"
                                                 r"has no attribute 'gtsv2_|unsupported operand type\(s\) for \*: 'int'",
                           jax="<0.6.2") for stage in ("lower", "symbolic_export")]


for dt in DTYPES:
    lims = [HALF_REFUSED, NO_HALF_ON_CPU]
    tol = TOL[dt]
    define(FAMILY, "cholesky", lambda a: linalg.cholesky(a), [_matrix(dt, (2, N, N), "spd")], dtype=dt,
           reference=lambda a: np.linalg.cholesky(a), limitations=lims, tol=tol)
    define(FAMILY, "qr", lambda a: linalg.qr(a, full_matrices=False), [_matrix(dt, (N + 2, N))], dtype=dt,
           invariant=_qr_invariant, limitations=lims, tol=tol)
    define(FAMILY, "svd", lambda a: linalg.svd(a, full_matrices=False), [_matrix(dt, (N + 1, N))], dtype=dt,
           invariant=_svd_invariant, limitations=lims + [SVD_TPU_CONJ, SVD_TPU_TOL, SVD_TPU_SYMBOLIC], tol=tol)
    define(FAMILY, "eigh", lambda a: linalg.eigh(a), [_matrix(dt, (N, N), "hermitian")], dtype=dt,
           invariant=_eigh_invariant, limitations=lims + [EIGH_TPU_TOL, EIGH_TPU_SYMBOLIC], tol=tol)
    define(FAMILY, "eig", lambda a: linalg.eig(a), [_matrix(dt, (N, N))], dtype=dt,
           invariant=_eig_invariant, limitations=lims + [EIG_TPU, EIG_HALF_GPU, EIG_GPU_EXPORT], tol=tol)
    define(FAMILY, "lu", lambda a: linalg.lu(a), [_matrix(dt, (N, N))], dtype=dt, invariant=_lu_invariant,
           limitations=lims, tol=tol)
    define(FAMILY, "triangular_solve",
           lambda a, b: linalg.triangular_solve(a, b, left_side=True, lower=True),
           [_matrix(dt, (N, N), "lower"), _matrix(dt, (N, 3))], dtype=dt,
           reference=lambda a, b: np.linalg.solve(a, b), tol=tol)
    define(FAMILY, "tridiagonal_solve", lambda dl, d, du, b: linalg.tridiagonal_solve(dl, d, du, b),
           [_tridiagonal(dt, "dl"), _tridiagonal(dt, "d"), _tridiagonal(dt, "du"), _matrix(dt, (2, N, 1))],
           dtype=dt, reference=_tridiagonal_ref, limitations=lims + [GTSV2_ROCM_EXPORT, GTSV_TPU_SYMBOLIC, *GTSV_GPU_OLD], tol=tol)
