"""The "trivial" catalog: N harnesses whose function is the identity on a float32 scalar.

Not part of the farm catalog. ``farm bench`` sweeps it to measure the farm's own cost
per harness (scheduling, transfer, storage): the JAX work per harness is as small as
it gets, so what a sweep spends beyond the workers' time is the farm's overhead.
Select with ``--catalog trivial --modules harnesses.trivial``.
"""
from farm.catalog import RandArg, define

FAMILY = "trivial"
CATALOG = "trivial"
#: How many harnesses the module defines (they differ only in the ``i`` param).
N = 500


def identity(x):
    return x


for i in range(N):
    define(FAMILY, "identity", identity, [RandArg((), "float32")], dtype="float32", group="trivial",
           params={"i": i}, catalog=CATALOG, compare="none")
