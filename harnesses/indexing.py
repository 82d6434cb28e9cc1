"""gather and scatter (replace, add, mul, min, max) with valid index arrays made by
CustomArg, against NumPy fancy indexing and ``ufunc.at``."""
import numpy as np
from jax import lax

from farm.catalog import ALL, FLOAT, INEXACT, INTEGER, NUMERIC, CustomArg, RandArg, define

FAMILY = "indexing"
OPERAND = (5, 3)
TOL = {"bfloat16": (2e-2, 5e-2), "float16": (4e-3, 1e-2)}

ROWS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
POINTS = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
SCATTER_ROWS = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                           scatter_dims_to_operand_dims=(0,))


def _row_indices(rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, OPERAND[0], size=(4, 1)).astype(np.int32)


def _unique_rows(rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(OPERAND[0])[:4].reshape(4, 1).astype(np.int32)


def _points(rng: np.random.Generator) -> np.ndarray:
    return np.stack([rng.integers(0, OPERAND[0], 6), rng.integers(0, OPERAND[1], 6)], axis=1).astype(np.int32)


SCATTERS = {
    "scatter": (lax.scatter, None),
    "scatter_add": (lax.scatter_add, np.add),
    "scatter_mul": (lax.scatter_mul, np.multiply),
    "scatter_min": (lax.scatter_min, np.minimum),
    "scatter_max": (lax.scatter_max, np.maximum),
}
DTYPES = {
    "scatter": ALL,
    "scatter_add": NUMERIC,
    "scatter_mul": NUMERIC,
    "scatter_min": ("bool",) + INTEGER + FLOAT,
    "scatter_max": ("bool",) + INTEGER + FLOAT,
}


def _scatter_ref(ufunc):
    def ref(x, idx, upd):
        out = x.copy()
        if ufunc is None:
            out[idx[:, 0]] = upd
        else:
            ufunc.at(out, idx[:, 0], upd)
        return out
    return ref


for dt in ALL:
    define(FAMILY, "gather",
           lambda x, i: lax.gather(x, i, ROWS, (1, OPERAND[1]), mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS),
           [RandArg(OPERAND, dt), CustomArg("rows_in_range", _row_indices, (4, 1), "int32")], dtype=dt,
           params={"dims": "rows"}, reference=lambda x, i: x[i[:, 0]], compare="exact")
    define(FAMILY, "gather",
           lambda x, i: lax.gather(x, i, POINTS, (1, 1), mode=lax.GatherScatterMode.CLIP),
           [RandArg(OPERAND, dt), CustomArg("points_in_range", _points, (6, 2), "int32")], dtype=dt,
           params={"dims": "points"}, reference=lambda x, i: x[i[:, 0], i[:, 1]], compare="exact")

for prim, (fn, ufunc) in SCATTERS.items():
    for dt in DTYPES[prim]:
        unique = prim == "scatter"  # replacement with duplicate indices has no defined winner
        domain = "unit" if prim == "scatter_mul" and dt in INEXACT else "normal"
        define(FAMILY, prim,
               lambda x, i, u, fn=fn, unique=unique: fn(x, i, u, SCATTER_ROWS, indices_are_sorted=False,
                                                        unique_indices=unique,
                                                        mode=lax.GatherScatterMode.FILL_OR_DROP),
               [RandArg(OPERAND, dt, domain),
                CustomArg("unique_rows" if unique else "rows_in_range", _unique_rows if unique else _row_indices,
                          (4, 1), "int32"),
                RandArg((4, OPERAND[1]), dt, domain)],
               dtype=dt, reference=_scatter_ref(ufunc), tol=TOL.get(dt))
