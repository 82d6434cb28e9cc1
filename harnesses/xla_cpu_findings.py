"""XLA CPU findings pinned as harnesses (docs/findings.md): each the smallest input that shows
one, behind a ``Limitation`` that states it, beside a twin that is right; a fix in XLA shows as
an unexpected pass. Found by ``farm fuzz``'s clean campaigns (docs/fuzzing.md)."""
import numpy as np
from jax import lax

from farm.catalog import CustomArg, Limitation, define

FAMILY = "xla_cpu_findings"

#: Found by farm fuzz (docs/findings.md): XLA's CPU float32 log of a subnormal is ln 2^-150
#: (-103.972) whatever the subnormal in an array of fewer than 8 elements, and -inf (the
#: subnormal flushed, which the reference accepts) from 8 on. Both lengths, spread over the
#: subnormal range, so a fix (or the short path changing) shows as an unexpected pass.
LOG_SUBNORMAL_SHORT = Limitation("XLA CPU float32 log of a subnormal in an array of fewer than 8 elements is "
                                 "ln 2^-150 whatever the subnormal", platforms=("cpu",), dtypes=("float32",),
                                 stage="compare", error="elements differ from the float64 reference",
                                 jax="<0.12")  # jaxlib 0.12's log is right there (docs/versions.md)
for n in (3, 8):
    subs = np.geomspace(1.4e-45, 1.1e-38, n).astype(np.float32)
    define(FAMILY, "log", lax.log, [CustomArg(f"subnormals:float32:{n}", lambda rng, v=subs: v.copy(),
                                              subs.shape, "float32")],
           dtype="float32", group="xla_cpu_findings", limitations=[LOG_SUBNORMAL_SHORT] if n < 8 else [])

#: Found by farm fuzz (docs/findings.md): XLA's CPU float32 pow of a subnormal base takes
#: its log as ln 2^-150 at any length (pow(1e-45, -0.5) = 3.78e22; IEEE 2.67e22, flushed inf).
POW_SUBNORMAL = Limitation("XLA CPU float32 pow of a subnormal base uses ln 2^-150 for its log", platforms=("cpu",),
                           dtypes=("float32",), stage="compare", error="elements differ from the float64 reference")
_BASES = np.repeat(np.geomspace(1.4e-45, 1.1e-38, 16).astype(np.float32), 4)
_EXPONENTS = np.tile(np.array([-0.5, -0.0831, 0.25, 1.0], np.float32), 16)
define(FAMILY, "pow", lax.pow, [CustomArg("subnormal_bases:float32:64", lambda rng: _BASES.copy(), _BASES.shape, "float32"),
                                CustomArg("exponents:float32:64", lambda rng: _EXPONENTS.copy(), _EXPONENTS.shape,
                                          "float32")],
       dtype="float32", group="xla_cpu_findings", limitations=[POW_SUBNORMAL])

#: Found by farm fuzz (docs/findings.md): XLA's CPU algebraic simplifier turns x / broadcast(y)
#: into x * broadcast(1 / y), and in float16 the reciprocal of a subnormal y overflows to inf,
#: so a subnormal x over a subnormal y is ±inf: IEEE gives a finite quotient (6e-08 / 6e-08 = 1),
#: flushing both to zero gives NaN. The same division without the broadcast is right.
DIV_BROADCAST_RECIPROCAL = Limitation("XLA CPU float16 x / broadcast(y) is x * (1/y): a subnormal over a subnormal "
                                      "is inf", platforms=("cpu",), dtypes=("float16",), stage="compare",
                                      error="elements differ from the float64 reference")
_NUM = np.where(np.arange(16) % 2 == 0, 6e-08, -0.7485)[None, :].repeat(4, 0).astype(np.float16)
_DEN = np.array([[-1.526e-05], [6e-08], [2e-05], [1.0]], np.float16)
define(FAMILY, "div", lambda x, y: lax.div(x, lax.broadcast_in_dim(y, x.shape, (0, 1))),
       [CustomArg("numerators:float16:4x16", lambda rng: _NUM.copy(), _NUM.shape, "float16"),
        CustomArg("small_divisors:float16:4x1", lambda rng: _DEN.copy(), _DEN.shape, "float16")],
       dtype="float16", group="xla_cpu_findings", params={"divisor": "broadcast"},
       limitations=[DIV_BROADCAST_RECIPROCAL])
define(FAMILY, "div", lax.div, [CustomArg("numerators:float16:4x16", lambda rng: _NUM.copy(), _NUM.shape, "float16"),
                                CustomArg("small_divisors:float16:4x16", lambda rng: np.broadcast_to(_DEN, _NUM.shape).copy(),
                                          _NUM.shape, "float16")],
       dtype="float16", group="xla_cpu_findings", params={"divisor": "same_shape"})

#: The same rewrite in float32 with huge divisors: 1 / 1.7e38 is subnormal, flushed to zero, so
#: -3.4e38 / broadcast(1.7e38) is -0 (IEEE -2).
DIV_BROADCAST_RECIPROCAL_HUGE = Limitation("XLA CPU float32 x / broadcast(y) is x * (1/y): 1/y flushed to zero for "
                                           "|y| > 2^126", platforms=("cpu",), dtypes=("float32",), stage="compare",
                                           error="elements differ from the float64 reference")
_NUM32 = np.array([-3.4028235e38, -4.8611764e37, 1.0, 3.75], np.float32)[None, :].repeat(4, 0)
_DEN32 = np.array([[1.7014117e38], [-1e38], [2.0], [1.0]], np.float32)
define(FAMILY, "div", lambda x, y: lax.div(x, lax.broadcast_in_dim(y, x.shape, (0, 1))),
       [CustomArg("numerators:float32:4x4", lambda rng: _NUM32.copy(), _NUM32.shape, "float32"),
        CustomArg("huge_divisors:float32:4x1", lambda rng: _DEN32.copy(), _DEN32.shape, "float32")],
       dtype="float32", group="xla_cpu_findings", params={"divisor": "broadcast"},
       limitations=[DIV_BROADCAST_RECIPROCAL_HUGE])
