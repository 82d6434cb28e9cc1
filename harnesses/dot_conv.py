"""dot_general (matmul, batched, vector, multi-contracting, preferred_element_type) and
conv_general_dilated (strides, padding, lhs/rhs dilation, feature groups, NHWC), against
float64 einsum / a NumPy sliding-window convolution."""
import numpy as np
from jax import lax

from farm.catalog import COMPLEX, FLOAT, INTEGER, NUMERIC, DtypeArg, Limitation, RandArg, StaticArg, define

FAMILY = "dot_conv"
TOL = {"bfloat16": (2e-2, 5e-2), "float16": (5e-3, 1e-2), "float32": (1e-5, 1e-5), "complex64": (1e-5, 1e-5)}
#: Seen on an H100 (jax 0.11.2): complex64 matmuls, and float32 ones accumulated in float64,
#: are off by ~1e-3 relative from float64 and from the CPU: the GPU's default precision.
TF32 = Limitation("NVIDIA GPUs: the default matmul precision lets XLA use TF32 for float32/complex64 "
                  "(~1e-3 relative; jax_default_matmul_precision='highest' restores float32)",
                  platforms=("cuda",), dtypes=("float32", "complex64"), stage="compare", tol=(5e-3, 5e-3))

# name: (lhs shape, rhs shape, (contracting, batch) dimension numbers, einsum spec)
DOTS = {
    "matmul": ((3, 4), (4, 5), (((1,), (0,)), ((), ())), "ij,jk->ik"),
    "matvec": ((3, 4), (4,), (((1,), (0,)), ((), ())), "ij,j->i"),
    "vecdot": ((6,), (6,), (((0,), (0,)), ((), ())), "i,i->"),
    "batch": ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), "bij,bjk->bik"),
    "two_contracting": ((3, 2, 4), (2, 4, 5), (((1, 2), (0, 1)), ((), ())), "iab,abk->ik"),
    "transposed_rhs": ((3, 4), (5, 4), (((1,), (1,)), ((), ())), "ij,kj->ik"),
}


def _einsum_ref(spec: str, out_dtype=None):
    def ref(a, b, *_):
        if a.dtype.kind in "iub":  # wrap around like the backend, in the operand's dtype
            wide = np.einsum(spec, a.astype(object), b.astype(object))
            kind = np.dtype(out_dtype) if out_dtype else a.dtype
            bits = kind.itemsize * 8
            flat = [int(v) % (1 << bits) for v in np.asarray(wide, dtype=object).ravel()]
            r = np.array(flat, dtype=np.dtype(f"uint{bits}")).reshape(np.shape(wide))
            return r.view(kind)
        return np.einsum(spec, a, b)
    return ref


for name, (ls, rs, dims, spec) in DOTS.items():
    for dt in NUMERIC:
        define(FAMILY, "dot_general", lambda a, b, dims=dims: lax.dot_general(a, b, dims),
               [RandArg(ls, dt), RandArg(rs, dt)], dtype=dt, params={"variant": name},
               reference=_einsum_ref(spec), tol=TOL.get(dt), limitations=[TF32])

# Mixed precision: narrow operands, wide accumulation.
PREFERRED = (("int8", "int32"), ("bfloat16", "float32"), ("float16", "float32"), ("float32", "float64"),
             ("int16", "int64"))
for dt, acc in PREFERRED:
    ls, rs, dims, spec = DOTS["matmul"]
    define(FAMILY, "dot_general",
           lambda a, b, acc, dims=dims: lax.dot_general(a, b, dims, preferred_element_type=np.dtype(acc)),
           [RandArg(ls, dt), RandArg(rs, dt), DtypeArg(acc)], dtype=dt,
           params={"variant": "matmul", "preferred": acc},
           reference=lambda a, b, _, acc=acc, spec=spec: _einsum_ref(spec, acc)(a.astype(acc), b.astype(acc)),
           tol=TOL.get(acc), limitations=[TF32])


# ------------------------------------------------------------------------- conv
def conv_ref(x, w, strides, padding, lhs_dil, rhs_dil, groups, layout="NCHW"):
    """Cross-correlation as XLA defines it, in float64 (NCHW/OIHW unless NHWC/HWIO)."""
    if layout == "NHWC":
        x, w = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
    n, c, h, wd = x.shape
    if lhs_dil != (1, 1):
        xd = np.zeros((n, c, (h - 1) * lhs_dil[0] + 1, (wd - 1) * lhs_dil[1] + 1), x.dtype)
        xd[:, :, ::lhs_dil[0], ::lhs_dil[1]] = x
        x = xd
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(padding))
    o, i, kh, kw = w.shape
    if rhs_dil != (1, 1):
        wdil = np.zeros((o, i, (kh - 1) * rhs_dil[0] + 1, (kw - 1) * rhs_dil[1] + 1), w.dtype)
        wdil[:, :, ::rhs_dil[0], ::rhs_dil[1]] = w
        w = wdil
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::strides[0], ::strides[1]]
    oh, ow = win.shape[2:4]
    xg = win.reshape(n, groups, i, oh, ow, *w.shape[2:])
    wg = w.reshape(groups, o // groups, i, *w.shape[2:])
    out = np.einsum("ngiyxhw,goihw->ngoyx", xg, wg).reshape(n, o, oh, ow)
    return out.transpose(0, 2, 3, 1) if layout == "NHWC" else out


# name: (lhs shape, rhs shape, strides, padding, lhs_dilation, rhs_dilation, groups, layout)
CONVS = {
    "basic": ((1, 2, 6, 6), (3, 2, 3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, "NCHW"),
    "strided_padded": ((2, 2, 7, 6), (4, 2, 3, 2), (2, 1), ((1, 1), (0, 2)), (1, 1), (1, 1), 1, "NCHW"),
    "dilated": ((1, 2, 8, 8), (2, 2, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (2, 2), 1, "NCHW"),
    "transposed": ((1, 2, 4, 4), (2, 2, 3, 3), (1, 1), ((2, 2), (2, 2)), (2, 2), (1, 1), 1, "NCHW"),
    "grouped": ((1, 4, 5, 5), (6, 2, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 2, "NCHW"),
    "nhwc": ((1, 6, 6, 2), (3, 3, 2, 4), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 1, "NHWC"),
}

for name, (ls, rs, strides, padding, lhs_dil, rhs_dil, groups, layout) in CONVS.items():
    dn = ("NCHW", "OIHW", "NCHW") if layout == "NCHW" else ("NHWC", "HWIO", "NHWC")
    for dt in FLOAT + COMPLEX + ("int32",):
        define(FAMILY, "conv_general_dilated",
               lambda x, w, s=strides, p=padding, ld=lhs_dil, rd=rhs_dil, g=groups, dn=dn:
                   lax.conv_general_dilated(x, w, s, p, ld, rd, dimension_numbers=dn, feature_group_count=g),
               [RandArg(ls, dt, "small_int" if dt in INTEGER else "normal"),
                RandArg(rs, dt, "small_int" if dt in INTEGER else "normal")],
               dtype=dt, params={"variant": name},
               reference=lambda x, w, a=(strides, padding, lhs_dil, rhs_dil, groups, layout): conv_ref(x, w, *a),
               tol={"bfloat16": (3e-2, 1e-1), "float16": (5e-3, 3e-2), "float32": (2e-5, 2e-5),
                    "complex64": (2e-5, 2e-5)}.get(dt))
