"""export: one multi-platform ``jax.export`` artifact, then a serialize round trip."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from farm.stages.record import Record, Timer, failure
from farm.stages.trace import Traced


@dataclass(frozen=True, slots=True)
class Exported(Record):
    """facts: platforms, calling-convention version, devices; ``handle`` is the Exported."""


@dataclass(frozen=True, slots=True)
class Serialized(Record):
    """The round trip: artifact bytes, size, sha256; ``handle`` is (bytes, deserialized)."""


def run(traced: Traced, platforms: tuple[str, ...]) -> Exported:
    label = "export"
    if not traced.ok:
        return Exported("export", label, "skipped", error="trace did not succeed")
    import jax

    _, jf, dyn = traced.handle
    timer = Timer()
    try:
        with timer():
            exp = jax.export.export(jf, platforms=platforms)(*dyn)
        return Exported("export", label, "ok", timer.seconds,
                        facts={"platforms": list(exp.platforms),
                               "calling_convention_version": exp.calling_convention_version,
                               "nr_devices": exp.nr_devices},
                        handle=exp)
    except Exception as e:
        return failure(Exported, "export", label, e, timer.seconds)


def serialize(exported: Exported) -> Serialized:
    if not exported.ok:
        return Serialized("serialize", exported.platform, "skipped", error="export did not succeed")
    import jax

    t_ser, t_de = Timer(), Timer()
    try:
        with t_ser():
            blob = bytes(exported.handle.serialize())
        with t_de():
            back = jax.export.deserialize(bytearray(blob))
        sha = hashlib.sha256(blob).hexdigest()
        exp = exported.handle
        same = (back.in_avals == exp.in_avals and back.out_avals == exp.out_avals
                and back.platforms == exp.platforms
                and bytes(back.mlir_module_serialized) == bytes(exp.mlir_module_serialized))
        return Serialized("serialize", exported.platform, "ok" if same else "fail",
                          t_ser.seconds + t_de.seconds,
                          error=None if same else "deserialized artifact differs from the exported one",
                          metrics={"artifact_bytes": float(len(blob)), "serialize_s": t_ser.seconds,
                                   "deserialize_s": t_de.seconds},
                          facts={"sha256": sha}, artifact=sha, handle=(blob, back))
    except Exception as e:
        return failure(Serialized, "serialize", exported.platform, e, t_ser.seconds + t_de.seconds)


def module_text(exported: Exported) -> str:
    return exported.handle.mlir_module()


def call(serialized: Serialized, dyn: list[Any]) -> Any:
    """Run the deserialized artifact on the local default backend."""
    return serialized.handle[1].call(*dyn)
