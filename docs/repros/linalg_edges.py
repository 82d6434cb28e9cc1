"""jnp.linalg / jax.scipy.linalg at edge matrices (float32, CPU): seven wrong answers and a hang.

Found by the api catalog's edge matrices (``farm.catalog.api._edge_matrices``), each standalone
here against NumPy in float32 (the same LAPACK routines in the same precision, so no case is
float64 against float32):

1. eigvals/eig: a matrix whose largest entry is above about 2**40 (or below 2**-40) gets
   eigenvalues scaled to that bound: eigvals(1e13 * A) / 1e13 is 0.028 where it is 1.25. Not
   JAX's own code: jaxlib's CPU kernels call the LAPACK that SciPy ships, and SciPy 1.17.1's
   sgeev does the same (scipy.linalg.lapack.sgeev); SciPy 1.18.1's is right. Seen with jax
   0.10.2 and 0.12.0.1 beside SciPy 1.17.1; not with 0.12.0.1 beside SciPy 1.18.1.
2. eigvalsh/eigh/cholesky (symmetrize_input=True, the default): (A + A^H) / 2 overflows where an
   entry is above half the largest float32: NaN eigenvalues, an infinite Cholesky factor.
3. qr: a matrix holding float32's largest value gets inf and NaN in R (sgeqrf: finite).
4. matrix_rank: the tolerance S.max() * max(M, N) * eps overflows to inf: rank 0, NumPy 1
   (jax 0.12.0.1; 0.10.2 gives 1).
5. jax.scipy.linalg.polar: both factors of such a matrix are zero.
6. jax.scipy.linalg.expm: a matrix holding -float32's largest value gives NaN (the answer is
   finite: exp of a very negative diagonal entry is 0).
7. svd with vectors (and pinv, lstsq) of a matrix holding inf never returns: LAPACK gesdd's
   rescaling makes inf NaN and bdsqr loops (Reference-LAPACK/lapack#1409; NumPy 2.5 checks for
   non-finite input first, numpy/numpy#32591). Run in a child with a time limit.

Exits 1 while any of them holds (jax 0.10.2 and 0.12.0.1 in bare venvs, 2026-12-04).
"""
import subprocess
import sys

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

MAX = np.finfo(np.float32).max
A = np.array([[2., 1, 0, 0], [1, 3, 1, 0], [0, 1, 4, 1], [0, 0, 1, 5]], np.float32)  # symmetric positive definite
G = np.array([[1., 2, 0, 1], [0, 1, 3, 0], [2, 0, 1, 1], [1, 1, 0, 2]], np.float32)  # general, nonsingular
bugs = []


def check(name, got, want, rtol=1e-3):
    got, want = np.asarray(got), np.asarray(want)
    bad = not np.allclose(got, want, rtol=rtol, atol=0)
    print(f"{'BUG' if bad else 'ok '} {name}: jax {got.ravel()[:4]} numpy(float32) {want.ravel()[:4]}")
    if bad:
        bugs.append(name)


print("jax", jax.__version__, "numpy", np.__version__)
big = A * np.float32(1e13)
check("eigvals(1e13 * A) / 1e13", np.sort(np.asarray(jnp.linalg.eigvals(big)).real) / 1e13,
      np.sort(np.linalg.eigvals(big).real) / 1e13)
tiny = A * np.float32(1e-13)
check("eigvals(1e-13 * A) * 1e13", np.sort(np.asarray(jnp.linalg.eigvals(tiny)).real) * 1e13,
      np.sort(np.linalg.eigvals(tiny).real) * 1e13)
m = A.copy()
m[0, 0] = MAX
check("eigvalsh(A with MAX at [0, 0])", jnp.linalg.eigvalsh(m), np.linalg.eigvalsh(m))
check("cholesky(A with MAX at [0, 0])[0, 0]", jnp.linalg.cholesky(m)[0, 0], np.linalg.cholesky(m)[0, 0])
g = G.copy()
g[0, 0] = MAX
check("|qr(G with MAX at [0, 0]).R|", np.abs(np.asarray(jnp.linalg.qr(g)[1])), np.abs(np.linalg.qr(g)[1]))
check("matrix_rank(G with MAX at [0, 0])", jnp.linalg.matrix_rank(g), np.linalg.matrix_rank(g))
check("polar(G with MAX at [0, 0]).P[0, 0]", jsl.polar(g)[1][0, 0], MAX)
gm = G.copy()
gm[0, 0] = -MAX
import scipy.linalg  # noqa: E402

check("expm(G with -MAX at [0, 0])[1:, 1:]", jsl.expm(gm)[1:, 1:], scipy.linalg.expm(gm.astype(np.float64))[1:, 1:])

child = ("import numpy as np, jax.numpy as jnp\n"
         "a = np.ones((3, 3), np.float32); a[0, 0] = np.inf\n"
         "print(jnp.linalg.svd(a)[1])\n")
try:
    subprocess.run([sys.executable, "-c", child], timeout=60, check=False, capture_output=True)
    print("ok  svd of a matrix holding inf returns")
except subprocess.TimeoutExpired:
    print("BUG svd of a 3x3 matrix holding inf: no answer in 60 s (LAPACK gesdd/bdsqr loops)")
    bugs.append("svd hang")

if bugs:
    print(f"{len(bugs)} wrong: {', '.join(bugs)}")
    sys.exit(1)
print("ok: every edge matrix answered as NumPy does")
