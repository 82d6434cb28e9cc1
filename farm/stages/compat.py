"""Where jax versions differ, in one place: every other module calls these, never a
version-specific spelling (``farm sweep --jax`` runs the same farm code on each version).

Measured on jax 0.6.2 to 0.10.2 (docs/versions.md): ``jax.enable_x64`` became public in
0.8.0 (before: ``jax.experimental.enable_x64``), and before 0.8.0 ``import jax`` does not
load ``jax.export``; avals have a ``memory_space`` from 0.7.0 on.
"""
from __future__ import annotations

import contextlib

from contextlib import AbstractContextManager
from typing import Any


def enable_x64(new_val: bool = True) -> AbstractContextManager[Any]:
    """``jax.enable_x64(new_val)``: the 64-bit mode inside a ``with`` block."""
    import jax

    fn = getattr(jax, "enable_x64", None)
    if fn is None:  # jax < 0.8.0
        from jax.experimental import enable_x64 as fn  # noqa: PLC0415
    return fn(new_val)


def jax_config(flags: tuple[tuple[str, Any], ...]) -> AbstractContextManager[Any]:
    """jax config flags (``jax_default_prng_impl``...) set on this thread inside a ``with`` block:
    around tracing, lowering and calling alike (a flag read while lowering, such as
    ``jax_threefry_partitionable``, must hold there too)."""
    if not flags:
        return contextlib.nullcontext()
    from jax._src import test_util as jtu  # noqa: PLC0415  (only for a harness that sets flags)

    return jtu.thread_local_config_context(**dict(flags))


def jax_export() -> Any:
    """The ``jax.export`` module (before 0.8.0 ``import jax`` does not load it)."""
    import jax.export  # noqa: PLC0415

    return jax.export


def calling_convention_range() -> tuple[int, int]:
    """The calling-convention versions this jax exports and reads, (lowest, highest)."""
    from jax._src.export import _export  # noqa: PLC0415  (where every version so far keeps them)

    return (_export.minimum_supported_calling_convention_version,
            _export.maximum_supported_calling_convention_version)


def aval_key(aval: Any) -> tuple[Any, ...]:
    """What identifies an abstract value across a serialization round trip: shape, dtype and
    (where the version has it) memory space."""
    return aval.shape, aval.dtype, getattr(aval, "memory_space", None)


def artifact_shardings(exported: Any, devices: list[Any]) -> tuple[list[Any], list[Any]]:
    """(in, out) shardings, flat, to run a multi-device ``Exported`` on ``devices``: on its
    own mesh where the artifact records NamedShardings (jax exports from 2026 carry them and
    then insist on that mesh), else from its HLO shardings on the first ``nr_devices``
    devices (older artifacts); unspecified ones replicated, so the call spans them all."""
    import jax
    from jax._src.sharding_impls import GSPMDSharding  # noqa: PLC0415  (HLO sharding + devices: no mesh needed)

    if getattr(exported, "_has_named_shardings", False):
        mesh = run_mesh(exported, devices)
        rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        return ([rep if s is None else s for s in exported.in_shardings_jax(mesh)],
                [rep if s is None else s for s in exported.out_shardings_jax(mesh)])
    devs = devices[:exported.nr_devices]
    rep = GSPMDSharding.get_replicated(devs)

    def one(hlo: Any) -> Any:
        return rep if hlo is None else GSPMDSharding(devs, hlo)

    return [one(h) for h in exported.in_shardings_hlo], [one(h) for h in exported.out_shardings_hlo]


def run_mesh(exported: Any, devices: list[Any]) -> Any:
    """A concrete mesh to run a multi-device ``Exported`` on: the export's own mesh shape,
    axis names and types where the artifact records them (jax exports from 2026 carry
    NamedShardings with their abstract mesh, and then insist on it), else one axis over
    ``nr_devices`` devices (older artifacts: HLO shardings only)."""
    import jax
    import numpy as np

    named = [s for s in (*getattr(exported, "_in_named_shardings", ()), *getattr(exported, "_out_named_shardings", ()))
             if s is not None]
    if named and getattr(exported, "_has_named_shardings", False):
        m = named[0].mesh
        return jax.sharding.Mesh(np.array(devices[:m.size]).reshape(m.axis_sizes), m.axis_names,
                                 axis_types=m.axis_types)
    return jax.sharding.Mesh(np.array(devices[:exported.nr_devices]), ("_devices",))


def gamma_impl() -> Any:
    """JAX's own gamma sampler (what ``random_gamma_p`` computes): ``jax._src.random`` became a
    package with a ``core`` module after 0.9.2; before, the function is in the module itself."""
    from jax._src import random as random_mod  # noqa: PLC0415

    fn = getattr(random_mod, "_gamma_impl", None)
    if fn is None:
        from jax._src.random import core as random_core  # noqa: PLC0415

        fn = random_core._gamma_impl
    return fn
