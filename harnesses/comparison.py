"""Comparison primitives (eq, ne, lt, le, gt, ge) over every dtype the op accepts.

The operands arrive stacked as one ``[2, 3, 4]`` array whose second half copies every
other element of the first, so both outcomes and the equality edge of lt/le/gt/ge are
exercised. Results are bool and compared exactly.
"""
import numpy as np
from jax import lax

from farm.catalog import ALL, COMPLEX, CustomArg, RandArg, define

FAMILY = "comparison"
SHAPE = (3, 4)

OPS = {
    "eq": (lax.eq, np.equal),
    "ne": (lax.ne, np.not_equal),
    "lt": (lax.lt, np.less),
    "le": (lax.le, np.less_equal),
    "gt": (lax.gt, np.greater),
    "ge": (lax.ge, np.greater_equal),
}
#: Complex numbers have no order: lax rejects lt/le/gt/ge on them.
ORDERED = tuple(d for d in ALL if d not in COMPLEX)


def _half_equal(dt: str):
    a_desc, b_desc = RandArg(SHAPE, dt), RandArg(SHAPE, dt)

    def make(rng: np.random.Generator) -> np.ndarray:
        a, b = a_desc.make(rng), b_desc.make(rng)
        same = (np.arange(a.size).reshape(SHAPE) % 2) == 0
        return np.stack([a, np.where(same, a, b)])
    return make


for prim, (fn, ref) in OPS.items():
    for dt in (ALL if prim in ("eq", "ne") else ORDERED):
        define(FAMILY, prim, lambda ab, fn=fn: fn(ab[0], ab[1]),
               [CustomArg("half_equal_pair", _half_equal(dt), (2,) + SHAPE, dt)],
               dtype=dt, reference=lambda ab, ref=ref: ref(ab[0], ab[1]), compare="exact")
