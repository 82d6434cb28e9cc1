"""A planted harness of several equations, for ``farm repro --minimize``: with a wrong
rule planted for one primitive (``FARM_PLANT=wrong_lowering:sin:cpu``) the minimizer must
cut it down to that one equation. Not in the farm catalog: ``--catalog planted_chain --modules
harnesses.planted_chain`` (its own module and catalog, so the planted catalog's users, in
this process or in workers that never import this module, see the same harnesses)."""
from jax import lax

from farm.catalog import RandArg, define

FAMILY = "planted"


def _chain(x, y):
    """Seven equations around one sin: what ``farm repro --minimize`` cuts down to the sin
    when a wrong sin rule is planted (``FARM_PLANT=wrong_lowering:sin:cpu``)."""
    b = lax.sin(lax.mul(x, y))
    c = lax.exp(lax.neg(lax.abs(y)))
    return lax.sub(lax.tanh(lax.add(b, c)), lax.cos(x))


define(FAMILY, "chain", _chain, [RandArg((8, 4), "float32"), RandArg((8, 4), "float32")], dtype="float32",
       group="planted_ok", catalog="planted_chain")
