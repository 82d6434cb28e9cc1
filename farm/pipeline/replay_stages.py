"""The pipeline's stages run on a stored export: ``serialize`` (the stored bytes read back
and deserialized), ``compile``, ``execute``, ``compare``.

Compile, execute and compare are the stages' own functions (``farm.stages.compile.run``,
``farm.stages.execute.run``, ``farm.stages.compare.run`` through ``replay_judge``); what
replay adds is where the module comes from (``jax.jit(exported.call)`` of a stored
artifact instead of a harness's lowering) and ``facts["reason"]``, one word saying why an
artifact did not replay.

No store here: the caller hands ``read(sha) -> bytes``, which verifies what it returns.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from farm.stages import compat
from farm.catalog import Harness
from farm.errors import FarmError
from farm.stages import iofile
from farm.pipeline.replay_judge import AGAINST, compare_replayed, tolerance
from farm.pipeline.replay_load import exported_facts, load_exported, reason_of
from farm.results import Options, Record
from farm.stages import compare, compile as compile_stage, execute
from farm.stages.export import needs_x64
from farm.stages.lower import Lowered, LoweredModule
from farm.stages.record import Timer, failure

#: The stages a replay runs, in order (names from ``farm.results.STAGES``).
REPLAY_STAGES = ("serialize", "compile", "execute", "compare")


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """One stored export as replay reads it: the addresses of its bytes, its meta, and the
    facts known before it runs (``replay_load.artifact_facts``)."""

    export_sha: str
    io_sha: str | None
    meta: Mapping[str, Any]
    facts: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a replay's serialize record hands on (its ``handle``; never stored)."""

    blob: bytes
    meta: Mapping[str, Any]
    exported: Any  # jax.export.Exported
    inputs: list[np.ndarray]
    expected: list[np.ndarray]  # the outputs stored with the artifact


@dataclass(frozen=True, slots=True)
class Target:
    """Where replay runs (this host's platform and device count) and how long execute times."""

    platform: str
    n_devices: int
    opts: Options = Options()


def run_stages(read: Callable[[str], bytes], art: StoredArtifact, target: Target, *, primitive: str,
               dtype: str | None = None, harness: Harness | None = None) -> list[Record]:
    """serialize → compile → execute → compare for one stored export; a failure is a
    record, never an exception. A serialize that fails stops there (as a failed trace does
    in the pipeline); a compile that fails is followed by the skipped execute and compare.
    The serialize record keeps its ``Loaded`` handle and execute its ``Outputs``."""
    ser = deserialize(read, art)
    if ser.status != "ok":
        return [ser]
    loaded: Loaded = ser.handle
    exp = loaded.exported
    with compat.enable_x64(needs_x64([*exp.in_avals, *exp.out_avals])):
        comp = compile_exported(loaded, target)
        ex = _with_reason(execute.run(comp, loaded.inputs, warmup=target.opts.warmup, repeats=target.opts.repeats))
    if ex.ok:
        cmp = compare_replayed(ex.handle.arrays, loaded.expected, primitive=primitive, platform=target.platform,
                               tol=tolerance(loaded.expected, harness, target.platform, dtype))
    else:
        cmp = compare.run(None, loaded.expected, platform=target.platform, against=AGAINST, rtol=0.0, atol=0.0,
                          exact=True)
    return [ser, comp.with_status(comp.status, handle=None), ex, cmp]


def deserialize(read: Callable[[str], bytes], art: StoredArtifact) -> Record:
    """The serialize stage run backwards: the stored export and its io read (and verified)
    and deserialized on this jax. Platform ``export``, as a sweep's serialize record."""
    facts = {**art.facts, "io": art.io_sha}
    timer = Timer()

    def stop(status: str, error: str, reason: str, error_type: str | None = None) -> Record:
        return Record("serialize", "export", status, timer.seconds, error_type=error_type, error=error[:1000],
                      facts={**facts, "reason": reason}, artifact=art.export_sha)

    try:
        with timer():
            blob = read(art.export_sha)
            if not art.io_sha:
                return stop("skipped", "no stored inputs/outputs for this export "
                            "(the sweep did not link its io artifact)", "no_io")
            inputs, expected = iofile.unpack(read(art.io_sha))
            exported = load_exported(blob, art.meta, inputs, expected)
            facts.update(exported_facts(exported, art.meta))
    except FarmError as e:  # corrupt, missing, unknown format or calling convention: one clear line
        return stop("error", str(e), reason_of(e), type(e).__name__)
    except Exception as e:  # the artifact does not read on this jax: that is the finding
        return failure(Record, "serialize", "export", e, timer.seconds, facts={**facts, "reason": reason_of(e)},
                       artifact=art.export_sha)
    return Record("serialize", "export", "ok", timer.seconds, facts=facts, artifact=art.export_sha,
                  handle=Loaded(blob, art.meta, exported, list(inputs), list(expected)))


def compile_exported(loaded: Loaded, target: Target) -> compile_stage.Compiled:
    """The compile stage on ``jax.jit(exported.call)`` for the stored inputs.

    An artifact exported for other platforms, or for more devices than this host has,
    is ``not_runnable_here``. One exported for this platform that fails to compile is an
    ``error`` even where the compile stage calls it not runnable (a custom call with no
    handler here): this jax no longer runs what it promised to."""
    exp, platform = loaded.exported, target.platform
    platforms = tuple(exp.platforms)
    if platform not in platforms:
        return compile_stage.Compiled("compile", platform, "not_runnable_here", facts={"reason": "platform"},
                                      error=f"exported for {platforms}, this host runs {platform}")
    if exp.nr_devices > target.n_devices:
        return compile_stage.Compiled("compile", platform, "not_runnable_here", facts={"reason": "devices"},
                                      error=f"needs {exp.nr_devices} devices, this host has {target.n_devices}")
    timer = Timer()
    try:
        with timer():
            lowered = jax.jit(exp.call).lower(*loaded.inputs)
    except Exception as e:
        return _with_reason(failure(compile_stage.Compiled, "compile", platform, e, timer.seconds))
    # compile reads only the jax Lowered; the module text is for census and the module artifact
    rec = compile_stage.run(Lowered("lower", platform, "ok", timer.seconds,
                                    handle=LoweredModule(lowered, module=None, text="")))
    rec = rec.with_status(rec.status, seconds=rec.seconds + timer.seconds)
    if rec.status == "not_runnable_here":
        return rec.with_status("error", facts={**rec.facts, "reason": "custom_call"})
    return _with_reason(rec)


def _with_reason(rec: Record) -> Record:
    """An errored record with ``facts["reason"]`` (custom_call, x64, runtime...)."""
    if rec.status != "error" or "reason" in rec.facts:
        return rec
    return rec.with_status(rec.status, facts={**rec.facts, "reason": reason_of(rec.error or "")})
