"""export_feature: a harness's export feature (``Harness.feature``) exported in one
configuration of platforms, round-tripped, and called on the CPU where it can be.

What each feature's artifacts did (``facts["observed"]``; ``farm.catalog.features`` says
what each kind must do, ``farm.judge.features`` checks it):

- ``donation``: ``aliased``/``aliased_after_roundtrip`` (the module's ``tf.aliasing_output``
  marks), ``same_as_native`` (a call with the argument donated), ``donated_consumed``;
- ``prng_key``: ``key_avals`` after the round trip, ``same_as_native`` (bitwise),
  ``other_impl`` (the error a key of another implementation raised, or ``None``);
- ``safety_check``: ``refused`` (the error of an export with every check on, or ``None``),
  ``target_in_module``, ``disabled_after_roundtrip``, ``call`` (the call's error, or
  ``None``: a target nobody registered here cannot run);
- ``device_count``: ``nr_devices`` of the artifact, ``called_on``, ``call`` (the call's
  error, or ``None``), ``same_as_native``.

A step that JAX refuses is recorded with its error; whether that is right is the judge's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.catalog.effects import label
from farm.results import Record
from farm.stages.record import Timer, failure


@dataclass(frozen=True, slots=True)
class FeatureExported(Record):
    """stage ``export_feature``, ``platform`` the configuration's label ("cpu+cuda+rocm+tpu").
    facts: ``kind``, ``platforms``, ``observed`` (see the module docstring)."""


def _error(fn: Any) -> str | None:
    """The first line of what ``fn()`` raised, or None."""
    try:
        fn()
    except Exception as e:  # JAX's refusal is what is recorded
        msg = str(e).strip()
        return f"{type(e).__name__}: {msg.splitlines()[0][:300] if msg else ''}"
    return None


def _same(a: Any, b: Any) -> bool:
    import jax

    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
                                      for x, y in zip(la, lb))


def run(h: Harness, dyn: list[Any], platforms: tuple[str, ...]) -> FeatureExported:
    """Export ``h.feature`` for ``platforms`` and observe what it does (never raises for a
    refusal JAX makes: that is an observation)."""
    f = h.feature
    assert f is not None, "an export-feature harness declares Harness.feature"
    lab = label(platforms)
    facts: dict[str, Any] = {"kind": f.kind, "platforms": list(platforms)}
    timer = Timer()
    try:
        with timer():
            observed = _KINDS[f.kind](h, dyn, platforms)
        return FeatureExported("export_feature", lab, "ok", timer.seconds, facts={**facts, "observed": observed})
    except Exception as e:
        rec = failure(FeatureExported, "export_feature", lab, e, timer.seconds, facts=facts)
        return rec.with_status("not_runnable_here") if isinstance(e, _TooFewDevices) else rec


def _donation(h: Harness, dyn: list[Any], platforms: tuple[str, ...]) -> dict[str, Any]:
    import jax
    from jax import export

    f = h.feature
    exp = export.export(jax.jit(f.fun, donate_argnums=f.donate), platforms=platforms)(*dyn)
    back = export.deserialize(exp.serialize())
    out: dict[str, Any] = {"aliased": "tf.aliasing_output" in exp.mlir_module(),
                           "aliased_after_roundtrip": "tf.aliasing_output" in back.mlir_module()}
    if "cpu" in platforms:
        want = jax.jit(f.fun)(*dyn)
        fresh = [jax.numpy.array(a, copy=True) for a in dyn]
        got = jax.jit(back.call, donate_argnums=f.donate)(*fresh)
        out["same_as_native"] = _same(got, want)
        out["donated_consumed"] = all(fresh[i].is_deleted() for i in f.donate)
    return out


def _prng_key(h: Harness, dyn: list[Any], platforms: tuple[str, ...]) -> dict[str, Any]:
    import jax
    from jax import export

    f = h.feature
    key = jax.random.key(h.seed, impl=f.impl)
    exp = export.export(jax.jit(f.fun), platforms=platforms)(key, *dyn)
    back = export.deserialize(exp.serialize())
    out: dict[str, Any] = {"key_avals": [str(a) for a in back.in_avals[:1]]}
    if "cpu" in platforms:
        out["same_as_native"] = _same(back.call(key, *dyn), jax.jit(f.fun)(key, *dyn))
        other = jax.random.key(h.seed, impl=f.other_impl)
        out["other_impl"] = _error(lambda: back.call(other, *dyn))
    return out


def _safety_check(h: Harness, dyn: list[Any], platforms: tuple[str, ...]) -> dict[str, Any]:
    import jax
    from jax import export

    f = h.feature
    out: dict[str, Any] = {"refused": _error(lambda: export.export(jax.jit(f.fun), platforms=platforms)(*dyn))}
    exp = export.export(jax.jit(f.fun), platforms=platforms,
                        disabled_checks=[export.DisabledSafetyCheck.custom_call(f.target)])(*dyn)
    back = export.deserialize(exp.serialize())
    out["target_in_module"] = f.target in back.mlir_module()
    out["disabled_after_roundtrip"] = [str(c) for c in back.disabled_safety_checks]
    if "cpu" in platforms:
        out["call"] = _error(lambda: jax.block_until_ready(back.call(*dyn)))
    return out


def _device_count(h: Harness, dyn: list[Any], platforms: tuple[str, ...]) -> dict[str, Any]:
    import jax
    from jax import export
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    f = h.feature
    devices = jax.devices()
    if len(devices) < max(f.exported_for, f.called_on):
        raise _TooFewDevices(f"{len(devices)} devices here; the feature needs {max(f.exported_for, f.called_on)}")

    def sharded(n: int) -> NamedSharding:
        return NamedSharding(Mesh(np.array(devices[:n]), ("d",)), PartitionSpec("d"))

    fun = jax.jit(f.fun) if f.exported_for == 1 else jax.jit(f.fun, in_shardings=sharded(f.exported_for),
                                                             out_shardings=sharded(f.exported_for))
    exp = export.export(fun, platforms=platforms)(*dyn)
    back = export.deserialize(exp.serialize())
    out: dict[str, Any] = {"nr_devices": back.nr_devices, "called_on": f.called_on}
    if "cpu" in platforms:
        on = sharded(f.called_on)
        placed = [jax.device_put(a, on) for a in dyn]
        got: list[Any] = []
        out["call"] = _error(lambda: got.append(jax.jit(back.call, in_shardings=on, out_shardings=on)(*placed)))
        if got:
            out["same_as_native"] = _same(got[0], jax.jit(f.fun)(*dyn))
    return out


class _TooFewDevices(RuntimeError):
    """This host has fewer devices than the feature needs (a not_runnable_here)."""


_KINDS = {"donation": _donation, "prng_key": _prng_key, "safety_check": _safety_check, "device_count": _device_count}
