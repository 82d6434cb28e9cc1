"""sort (one operand, several operands, stable, descending via keys), argsort and
top_k. Inputs with ties use stable sorts so the order is defined."""
import numpy as np
from jax import lax

from farm.catalog import ALL, FLOAT, INTEGER, CustomArg, RandArg, chlo_leak, define, np_dtype

FAMILY = "sort"
SHAPE = (3, 6)


def _iota(rng: np.random.Generator) -> np.ndarray:
    return np.broadcast_to(np.arange(SHAPE[1], dtype=np.int32), SHAPE).copy()


def _lex_sort(x):
    """NumPy sorts complex lexicographically (real, then imaginary), as lax does."""
    return np.sort(x, axis=-1, kind="stable")


def _distinct(dt: str):
    """Distinct values, so top_k has one right answer."""
    def make(rng: np.random.Generator) -> np.ndarray:
        base = np.stack([rng.permutation(SHAPE[1]) for _ in range(SHAPE[0])])
        vals = base - 2 if dt not in ("uint8", "uint16", "uint32", "uint64") else base
        if dt in FLOAT:
            vals = vals * 0.75 + 0.125
        return vals.astype(np_dtype(dt))
    return make


def _top3(x):
    idx = np.argsort(x, axis=1)[:, ::-1][:, :3]  # distinct values: no ties to order
    return np.take_along_axis(x, idx, 1), idx.astype(np.int32)


def _small(dt):
    return "small_int" if dt in INTEGER else "normal"


for dt in ALL:
    define(FAMILY, "sort", lambda x: lax.sort(x, dimension=1), [RandArg(SHAPE, dt, _small(dt))], dtype=dt,
           reference=_lex_sort, compare="exact")
    # Two operands, one key: values follow their keys; ties keep input order (stable).
    define(FAMILY, "sort", lambda k, v: lax.sort((k, v), dimension=1, is_stable=True, num_keys=1),
           [RandArg(SHAPE, dt, _small(dt)), RandArg(SHAPE, "float32")], dtype=dt, params={"operands": 2},
           reference=lambda k, v: (np.take_along_axis(k, np.argsort(k, axis=1, kind="stable"), 1),
                                   np.take_along_axis(v, np.argsort(k, axis=1, kind="stable"), 1)),
           compare="exact")
    define(FAMILY, "argsort",
           lambda x, i: lax.sort((x, i), dimension=1, is_stable=True, num_keys=1)[1],
           [RandArg(SHAPE, dt, _small(dt)), CustomArg("iota_axis1", _iota, SHAPE, "int32")], dtype=dt,
           reference=lambda x, i: np.argsort(x, axis=1, kind="stable").astype(np.int32), compare="exact")

# Two keys: sort by the first, break ties by the second.
for dt in ("int8", "int32", "uint16", "float32"):
    define(FAMILY, "sort", lambda a, b: lax.sort((a, b), dimension=1, is_stable=True, num_keys=2),
           [RandArg(SHAPE, dt, "small_int" if dt in INTEGER else "normal"), RandArg(SHAPE, "int32", "small_int")],
           dtype=dt, params={"operands": 2, "num_keys": 2},
           reference=lambda a, b: tuple(np.take_along_axis(z, np.lexsort((b, a), axis=1), 1) for z in (a, b)),
           compare="exact")

for dt in INTEGER + FLOAT:
    define(FAMILY, "top_k", lambda x: lax.top_k(x, 3), [CustomArg("distinct", _distinct(dt), SHAPE, dt)], dtype=dt,
           params={"k": 3},
           reference=_top3, compare="exact", limitations=chlo_leak("top_k"))
