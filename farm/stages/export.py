"""export: one multi-platform ``jax.export`` artifact, then a serialize round trip."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.stages import compat
from farm.catalog import X64_DTYPES
from farm.stages.record import Timer, failure
from farm.results import Record
from farm.stages.trace import Traced

#: JAX refuses to export a module with custom calls that have no compatibility guarantee.
UNGUARANTEED = "custom calls whose targets have no compatibility guarantees"
_TARGET = re.compile(r"stablehlo\.custom_call @([\w.$-]+)")


@dataclass(frozen=True, slots=True)
class ExportedArtifact:
    """What serialize needs of an export (``Exported.handle``; never stored)."""

    exported: Any  # jax.export.Exported


@dataclass(frozen=True, slots=True)
class SerializedArtifact:
    """The round trip's results (``Serialized.handle``; the bytes are stored as the export artifact)."""

    blob: bytes  # jax.export.serialize's bytes
    deserialized: Any  # jax.export.Exported read back from them


@dataclass(frozen=True, slots=True)
class Exported(Record):
    """facts: platforms, calling-convention version, devices; ``handle`` is an ``ExportedArtifact``.

    ``platform`` is ``"export"`` for the artifact, or a platform name for the record of
    a platform that could not be exported (see ``run_all``)."""


@dataclass(frozen=True, slots=True)
class Serialized(Record):
    """The round trip: artifact bytes, size, sha256; ``handle`` is a ``SerializedArtifact``."""

    @property
    def changed(self) -> list[str]:
        """What the deserialized artifact no longer says as the exported one did."""
        return list(self.facts.get("changed") or [])


def run(traced: Traced, platforms: tuple[str, ...], label: str = "export") -> Exported:
    """``jax.export`` for these platforms at once."""
    if not traced.ok:
        return Exported("export", label, "skipped", error="trace did not succeed")
    import jax

    timer = Timer()
    try:
        with timer():
            exp = compat.jax_export().export(traced.handle.jitted, platforms=platforms)(*traced.handle.dyn)
        return Exported("export", label, "ok", timer.seconds,
                        facts={"platforms": list(exp.platforms),
                               "calling_convention_version": exp.calling_convention_version,
                               "nr_devices": exp.nr_devices},
                        handle=ExportedArtifact(exp))
    except Exception as e:
        rec = failure(Exported, "export", label, e, timer.seconds, facts={"platforms": list(platforms)})
        if UNGUARANTEED in str(e):
            targets = sorted(set(_TARGET.findall(str(e))))
            rec = rec.with_status("error", error_type="UnguaranteedCustomCall",
                                  error=f"cannot export for {','.join(platforms)}: custom calls without a "
                                        f"compatibility guarantee: {', '.join(targets) or '?'}",
                                  facts={**rec.facts, "unguaranteed": targets})
        return rec


def run_all(traced: Traced, platforms: tuple[str, ...]) -> list[Exported]:
    """The multi-platform export, and what stopped any platform from being in it.

    When JAX refuses the export because some platforms' lowerings call custom calls
    without a compatibility guarantee, each platform is exported alone to find which:
    each of those gets its own failed record (``platform`` = its name, so limitations
    and coverage attribute the gap to it), and the artifact is exported again for the
    others, with ``dropped_platforms`` as a fact. The artifact record comes first.
    """
    ex = run(traced, platforms)
    if ex.ok or ex.error_type != "UnguaranteedCustomCall" or len(platforms) < 2:
        return [ex]
    alone = [run(traced, (p,), label=p) for p in platforms]
    refused = [r for r in alone if not r.ok]
    kept = tuple(p for p, r in zip(platforms, alone) if r.ok)
    if not refused:  # every platform exports alone, not together: report the joint failure
        return [ex]
    dropped = {"dropped_platforms": [r.platform for r in refused]}
    if not kept:
        return [Exported("export", "export", "skipped", ex.seconds, error="no platform could be exported",
                         facts={**ex.facts, **dropped})] + refused
    again = run(traced, kept)
    return [again.with_status(again.status, facts={**again.facts, **dropped})] + refused


def serialize(exported: Exported) -> Serialized:
    if not exported.ok:
        return Serialized("serialize", exported.platform, "skipped", error="export did not succeed")
    import jax

    t_ser, t_de = Timer(), Timer()
    try:
        with t_ser():
            blob = bytes(exported.handle.exported.serialize())
        with t_de():
            back = compat.jax_export().deserialize(bytearray(blob))
        sha = hashlib.sha256(blob).hexdigest()
        changed, not_carried = differences(exported.handle.exported, back)
        facts: dict[str, Any] = {"sha256": sha}
        if not_carried:
            facts["not_carried"] = not_carried
        if changed:
            facts["changed"] = changed
        return Serialized("serialize", exported.platform, "ok", t_ser.seconds + t_de.seconds,
                          metrics={"artifact_bytes": float(len(blob)), "serialize_s": t_ser.seconds,
                                   "deserialize_s": t_de.seconds},
                          facts=facts, artifact=sha, handle=SerializedArtifact(blob, back))
    except Exception as e:
        return failure(Serialized, "serialize", exported.platform, e, t_ser.seconds + t_de.seconds)


#: Per-aval details that JAX's serialization format does not write: an aval keeps only
#: shape, dtype and memory space, and gets its sharding back from the artifact's named
#: shardings (None when the function had no in/out shardings), so an output aval that
#: carried the mesh of a shard_map or sharding constraint comes back with an empty mesh.
#: ``Exported.call`` builds its results from the named shardings, never from these.
_AVAL_NOT_CARRIED = ("sharding", "weak_type")


def differences(exp: Any, back: Any) -> tuple[list[str], dict[str, str]]:
    """(what the round trip changed, what it dropped that the format does not carry:
    field → the exported value).

    Every field of ``jax.export.Exported`` must survive (module bytes, platforms, trees,
    HLO and named shardings, effects, kept vars...), avals by shape, dtype and memory
    space; ``_get_vjp`` is rebuilt on demand and is not compared.
    """
    changed: list[str] = []
    not_carried: dict[str, str] = {}
    for f in dataclasses.fields(exp):
        if f.name == "_get_vjp":
            continue
        a, b = getattr(exp, f.name), getattr(back, f.name)
        if f.name in ("in_avals", "out_avals"):
            if len(a) != len(b):
                changed.append(f.name)
                continue
            for i, (x, y) in enumerate(zip(a, b)):
                if compat.aval_key(x) != compat.aval_key(y):
                    changed.append(f"{f.name}[{i}]")
                not_carried.update({f"{f.name}[{i}].{k}": str(getattr(x, k, None)) for k in _AVAL_NOT_CARRIED
                                    if getattr(x, k, None) != getattr(y, k, None)})
        elif f.name == "mlir_module_serialized":
            if bytes(a) != bytes(b):
                changed.append(f.name)
        elif a != b:
            changed.append(f.name)
    return changed, not_carried


def call(serialized: Serialized, dyn: list[Any]) -> Any:
    """Run the deserialized artifact on the local default backend."""
    return serialized.handle.deserialized.call(*dyn)


def needs_x64(arrays: Iterable[Any]) -> bool:
    return any(np.dtype(getattr(a, "dtype", np.float32)).name in X64_DTYPES for a in arrays)


def run_exported(exported: Any, inputs: Sequence[Any]) -> list[np.ndarray]:
    """Run an ``Exported`` (from any host, any jax) on this host's default backend, with
    x64 on when its types need it; outputs as numpy arrays. Replay and xhost share it."""
    import jax

    with compat.enable_x64(needs_x64(list(exported.in_avals) + list(exported.out_avals))):
        n = exported.nr_devices
        if n <= 1:
            out = jax.jit(exported.call)(*inputs)
        else:  # a sharded artifact runs under its shardings on n of this host's devices
            if len(jax.devices()) < n:
                raise NotEnoughDevices(f"the artifact was exported for {n} devices; this host has "
                                       f"{len(jax.devices())}")
            ins, outs = compat.artifact_shardings(exported, jax.devices())
            unflat = jax.tree_util.tree_unflatten
            in_sh, _ = unflat(exported.in_tree, ins)  # (args, kwargs)
            out_sh = unflat(exported.out_tree, outs)
            out = jax.jit(exported.call, in_shardings=in_sh, out_shardings=out_sh)(*inputs)
        return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)]


class NotEnoughDevices(RuntimeError):
    """A multi-device artifact on a host with fewer devices: not runnable here, not a failure."""
