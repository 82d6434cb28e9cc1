"""The serialize stage run backwards, and compile for a deserialized export: how a stored
artifact (a sweep's export, or JAX's back-compat data) enters the stages.

``read`` gives a ``Record("serialize", "export", ...)`` whose handle is a ``Loaded``;
``compile_exported`` gives the compile stage's own record for ``jax.jit(exported.call)``.
``facts["reason"]`` says in one word why an artifact did not replay. No store: the caller
hands the bytes (the store verified them when it read them).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.errors import FarmError
from farm.results import Record
from farm.formats import iofile
from farm.stages import compile as compile_stage
from farm.stages.lower import Lowered, LoweredModule
from farm.stages.record import Timer, failure
from farm.stages.stored import exported_facts, load_exported, reason_of


@dataclass(frozen=True, slots=True)
class Loaded:
    """What the deserialize record hands on (its ``handle``; never stored)."""

    blob: bytes
    meta: Mapping[str, Any]
    exported: Any  # jax.export.Exported
    inputs: list[np.ndarray]
    expected: list[np.ndarray]  # the outputs stored with the artifact


def read(blob: bytes, io: bytes | None, meta: Mapping[str, Any], facts: Mapping[str, Any], *,
         export_sha: str, io_sha: str | None) -> Record:
    """The stored export and its inputs/outputs deserialized on this jax: platform ``export``,
    as a sweep's serialize record. A failure is a record, never an exception."""
    facts = {**facts, "io": io_sha}
    timer = Timer()

    def stop(status: str, error: str, reason: str, error_type: str | None = None) -> Record:
        return Record("serialize", "export", status, timer.seconds, error_type=error_type, error=error[:1000],
                      facts={**facts, "reason": reason}, artifact=export_sha)

    if io is None:
        return stop("skipped", "no stored inputs/outputs for this export (the sweep did not link its io artifact)",
                    "no_io")
    try:
        with timer():
            inputs, expected = iofile.unpack(io)
            exported = load_exported(blob, meta, inputs, expected)
            facts.update(exported_facts(exported, meta))
    except FarmError as e:  # corrupt, unknown format or calling convention: one clear line
        return stop("error", str(e), reason_of(e), type(e).__name__)
    except Exception as e:  # the artifact does not read on this jax: that is the finding
        return failure(Record, "serialize", "export", e, timer.seconds, facts={**facts, "reason": reason_of(e)},
                       artifact=export_sha)
    return Record("serialize", "export", "ok", timer.seconds, facts=facts, artifact=export_sha,
                  handle=Loaded(blob, meta, exported, list(inputs), list(expected)))


def compile_exported(loaded: Loaded, platform: str, n_devices: int) -> compile_stage.Compiled:
    """The compile stage on ``jax.jit(exported.call)`` for the stored inputs.

    An artifact exported for other platforms, or for more devices than this host has,
    is ``not_runnable_here``. One exported for this platform that fails to compile is an
    ``error`` even where the compile stage calls it not runnable (a custom call with no
    handler here): this jax no longer runs what it promised to."""
    import jax

    exp = loaded.exported
    platforms = tuple(exp.platforms)
    if platform not in platforms:
        return compile_stage.Compiled("compile", platform, "not_runnable_here", facts={"reason": "platform"},
                                      error=f"exported for {platforms}, this host runs {platform}")
    if exp.nr_devices > n_devices:
        return compile_stage.Compiled("compile", platform, "not_runnable_here", facts={"reason": "devices"},
                                      error=f"needs {exp.nr_devices} devices, this host has {n_devices}")
    timer = Timer()
    try:
        with timer():
            lowered = jax.jit(exp.call).lower(*loaded.inputs)
    except Exception as e:
        return with_reason(failure(compile_stage.Compiled, "compile", platform, e, timer.seconds))
    # compile reads only the jax Lowered; the module text is for census and the module artifact
    rec = compile_stage.run(Lowered("lower", platform, "ok", timer.seconds,
                                    handle=LoweredModule(lowered, module=None, text="")))
    rec = rec.with_status(rec.status, seconds=rec.seconds + timer.seconds)
    if rec.status == "not_runnable_here":
        return rec.with_status("error", facts={**rec.facts, "reason": "custom_call"})
    return with_reason(rec)


def with_reason(rec: Record) -> Record:
    """An errored record with ``facts["reason"]`` (custom_call, x64, runtime...)."""
    if rec.status != "error" or "reason" in rec.facts:
        return rec
    return rec.with_status(rec.status, facts={**rec.facts, "reason": reason_of(rec.error or "")})
