"""xhost: an artifact exported on another host (another jax, another machine), deserialized
and run here, then compared three ways.

The lowered-on × run-on matrix for device hosts: the CPU host's serialized export (with
the inputs it ran and the outputs it got) travels in the jobs file; the device host runs
it natively; the judge (``farm.judge.xhost``) compares it with (a) the float64 reference,
(b) the CPU host's outputs, (c) this host's own native lowering of the same harness. Which of the three disagree
says where a difference comes from: version skew in the artifact, the device's numerics,
or this host's lowering rules.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.stages import compat
from farm.formats import iofile
from farm.stages.export import NotEnoughDevices, run_exported
from farm.stages.record import Timer, failure
from farm.results import Record


@dataclass(frozen=True, slots=True)
class CrossHost(Record):
    """facts: vs_reference / vs_cpu_host / vs_native statuses, the lowering host's versions;
    metrics: error metrics prefixed per comparison."""

    @property
    def inputs_identical(self) -> bool:
        """Whether the artifact ran on this host's own inputs (then the reference applies)."""
        return bool(self.facts.get("inputs_identical"))


@dataclass(frozen=True)
class Prior:
    """What the lowering host sends: the serialized export, its inputs and outputs; and, for
    a Pallas harness, each target's kernel artifact ({target label: {"export": base64,
    "meta": ...}}, deserialized by the ``pallas_xver`` stage). ``export`` is empty where only
    kernel artifacts came (no xhost stage then)."""

    export: bytes
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    meta: dict[str, Any]
    pallas: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"meta": self.meta}
        if self.export:
            out.update(export=base64.b64encode(self.export).decode(),
                       io=base64.b64encode(iofile.pack(self.inputs, self.outputs)).decode())
        if self.pallas:
            out["pallas"] = self.pallas
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Prior":
        if "export" not in d:
            return cls(b"", [], [], d.get("meta") or {}, dict(d.get("pallas") or {}))
        prior = cls.from_blobs(base64.b64decode(d["export"]), base64.b64decode(d["io"]), d.get("meta") or {})
        return cls(prior.export, prior.inputs, prior.outputs, prior.meta, dict(d.get("pallas") or {}))

    @classmethod
    def from_blobs(cls, export: bytes, io_npz: bytes, meta: dict[str, Any]) -> "Prior":
        ins, outs = iofile.unpack(io_npz)
        return cls(export, ins, outs, meta)


def same_inputs(a: list[Any], b: list[Any]) -> bool:
    """Bit-for-bit equal inputs (NaNs included), so the reference applies to both runs."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    return True


def run(prior: Prior, platform: str, dyn: list[Any] | None) -> CrossHost:
    """Deserialize ``prior.export`` and run it here on its own inputs: a record that ran
    (``ok``, its outputs in ``handle``) for the judge to compare three ways
    (``farm.judge.xhost``), or the record saying why it could not run."""
    import jax

    timer = Timer()
    facts: dict[str, Any] = {"lowered_on": prior.meta.get("jax_version"),
                             "lowered_platforms": prior.meta.get("platforms"),
                             "run_on_jax": jax.__version__}
    actual = _run_artifact(prior, platform, facts, timer)
    if isinstance(actual, CrossHost):
        return actual
    facts["inputs_identical"] = dyn is not None and same_inputs(prior.inputs, dyn)
    return CrossHost("xhost", platform, "ok", timer.seconds, metrics={"xhost_s": timer.seconds}, facts=facts,
                     handle=actual)


def _run_artifact(prior: Prior, platform: str, facts: dict[str, Any], timer: Timer) -> list[np.ndarray] | CrossHost:
    """The artifact deserialized and run here: its outputs, or the record saying why not."""
    exp = None
    try:
        with timer():
            exp = compat.jax_export().deserialize(bytearray(prior.export))
            if platform not in exp.platforms:
                return CrossHost("xhost", platform, "not_runnable_here", timer.seconds,
                                 error=f"the artifact was exported for {', '.join(exp.platforms)} only",
                                 facts={**facts, "artifact_platforms": list(exp.platforms)})
            return run_exported(exp, prior.inputs)
    except NotEnoughDevices as e:
        return CrossHost("xhost", platform, "not_runnable_here", timer.seconds, error=str(e),
                         error_type="NotEnoughDevices", facts={**facts, "nr_devices": exp.nr_devices if exp else None})
    except Exception as e:
        return failure(CrossHost, "xhost", platform, e, timer.seconds, facts=facts)
