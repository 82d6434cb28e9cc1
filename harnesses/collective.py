"""Collectives under ``jax.shard_map`` on a mesh of 8 devices (psum, pmax, all_gather,
ppermute, all_to_all, psum_scatter), a NamedSharding constraint, and a function over an
AbstractMesh. The mesh is built inside each function, at trace time.

Workers force 8 host devices (workers/runtime.py); so that a plain pytest run of this
family does too, importing this module asks for them when no backend is up yet.
"""
import os

import jax
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

from farm.catalog import Limitation, RandArg, define

FAMILY = "collective"
DEVICES = 8
DTYPES = ("int32", "bfloat16", "float32", "float64")
TOL = {"bfloat16": (2e-2, 5e-2), "float32": (2e-5, 1e-5)}


def _want_host_devices() -> None:
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={DEVICES}".strip()


_want_host_devices()


AUTO = jax.sharding.AxisType.Auto


def _mesh():
    # Auto axes: shard_map and sharding constraints take unsharded (numpy) inputs.
    return jax.make_mesh((DEVICES,), ("x",), axis_types=(AUTO,))


def _smap(body, in_specs, out_specs):
    def fun(x):
        return jax.shard_map(body, mesh=_mesh(), in_specs=in_specs, out_specs=out_specs)(x)
    return fun


PERM = [(i, (i + 1) % DEVICES) for i in range(DEVICES)]

# primitive: (function of the global [8, 4] operand, reference)
OPS = {
    "psum": (_smap(lambda b: lax.psum(b, "x"), P("x"), P()), lambda x: x.sum(0, keepdims=True)),
    "pmax": (_smap(lambda b: lax.pmax(b, "x"), P("x"), P()), lambda x: x.max(0, keepdims=True)),
    # to="invarying": the gathered value is the same on every device, so out_specs P() holds
    # (all_gather's result is typed varying by default, and shard_map rejects P() for it).
    "all_gather": (_smap(lambda b: lax.all_gather(b, "x", tiled=True, to="invarying"), P("x"), P()), lambda x: x),
    "ppermute": (_smap(lambda b: lax.ppermute(b, "x", PERM), P("x"), P("x")), lambda x: np.roll(x, 1, 0)),
    "all_to_all": (_smap(lambda b: lax.all_to_all(b, "x", 1, 0, tiled=True), P("x"), P("x")),
                   lambda x: x.T.reshape(-1, 1)),
    "psum_scatter": (_smap(lambda b: lax.psum_scatter(b.reshape(DEVICES, -1), "x", tiled=True), P("x"), P("x")),
                     lambda x: x.sum(0).reshape(DEVICES, -1)),
}


def _constrained(x):
    y = lax.with_sharding_constraint(x, NamedSharding(_mesh(), P("x")))
    return y * 2 + 1


def _abstract(x):
    """shard_map over an AbstractMesh of the same 8 devices (what an exporter for another
    topology writes)."""
    mesh = jax.sharding.AbstractMesh((4, 2), ("a", "b"), axis_types=(AUTO, AUTO))
    return jax.shard_map(lambda b: lax.psum(b, ("a", "b")), mesh=mesh, in_specs=P(("a", "b")), out_specs=P())(x)


#: Jitted directly (no concrete mesh in context), a shard_map over an AbstractMesh lowers
#: to a 1-device module whose xla.sdy.GlobalToLocalShape custom call the host compiler
#: has no implementation for. Its export runs once called under a concrete mesh.
ABSTRACT_COMPILE = Limitation("jit of shard_map over an AbstractMesh, without a concrete mesh, lowers to a 1-device "
                              "module with xla.sdy.GlobalToLocalShape, which XLA:CPU cannot compile; only its export "
                              "runs (called under a concrete mesh)", platforms=("cpu",), stage="compile")

#: all_gather's ``to='invarying'`` is new in jax 0.10.0 (jax-ml/jax c99d000; 0.9.2 refuses the value).
#: jax.shard_map is public from jax 0.6.1 (0.5.3 has only jax.experimental.shard_map).
NEEDS = {"all_gather": {"lax.all_gather(to='invarying')": ">=0.10"}}
SHARD_MAP = {"jax.shard_map": ">=0.6.1"}

for prim, (fn, ref) in OPS.items():
    for dt in DTYPES:
        shape = (DEVICES, DEVICES) if prim in ("all_to_all", "psum_scatter") else (DEVICES, 4)
        define(FAMILY, prim, fn, [RandArg(shape, dt)], dtype=dt, devices=DEVICES, reference=ref, tol=TOL.get(dt),
               needs={**SHARD_MAP, **NEEDS.get(prim, {})})
for dt in DTYPES:
    define(FAMILY, "sharding_constraint", _constrained, [RandArg((DEVICES, 4), dt)], dtype=dt, devices=DEVICES,
           reference=lambda x: x * 2 + 1, tol=TOL.get(dt))
    define(FAMILY, "psum", _abstract, [RandArg((DEVICES, 4), dt)], dtype=dt, devices=DEVICES,
           params={"mesh": "abstract_4x2"}, reference=lambda x: x.sum(0, keepdims=True), tol=TOL.get(dt),
           limitations=[ABSTRACT_COMPILE], needs=SHARD_MAP)
