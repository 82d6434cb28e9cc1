"""xhost: an artifact exported on another host (another jax, another machine), deserialized
and run here, then compared three ways.

The lowered-on × run-on matrix for device hosts: the CPU host's serialized export (with
the inputs it ran and the outputs it got) travels in the jobs file; the device host runs
it natively and compares it with (a) the float64 reference, (b) the CPU host's outputs,
(c) this host's own native lowering of the same harness. Which of the three disagree
says where a difference comes from: version skew in the artifact, the device's numerics,
or this host's lowering rules.
"""
from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.stages import compat
from farm.formats import iofile
from farm.stages.compare import compare_outputs
from farm.stages.export import NotEnoughDevices, run_exported
from farm.stages.record import Timer, failure
from farm.results import Record, SEVERITY


@dataclass(frozen=True, slots=True)
class CrossHost(Record):
    """facts: vs_reference / vs_cpu_host / vs_native statuses, the lowering host's versions;
    metrics: error metrics prefixed per comparison."""


@dataclass(frozen=True)
class Prior:
    """What the lowering host sends: the serialized export, its inputs and outputs."""

    export: bytes
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    meta: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"export": base64.b64encode(self.export).decode(),
                "io": base64.b64encode(iofile.pack(self.inputs, self.outputs)).decode(), "meta": self.meta}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Prior":
        return cls.from_blobs(base64.b64decode(d["export"]), base64.b64decode(d["io"]), d.get("meta") or {})

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


def run(prior: Prior, platform: str, dyn: list[Any] | None, *, native: list[np.ndarray] | None,
        reference: list[np.ndarray] | None, rtol: float, atol: float, exact: bool,
        promised: list[dict[str, Any]] | None = None,
        invariant: Callable[[list[np.ndarray]], tuple[float, float]] | None = None,
        judge: Callable[[list[np.ndarray]], tuple[str, str | None]] | None = None) -> CrossHost:
    """Deserialize ``prior.export``, run it here on its own inputs, compare three ways.

    With an ``invariant`` (results that are not unique: eigenvectors, SVD signs) the raw
    comparisons are kept as facts and the verdict is the invariant's. Without a reference
    array, ``judge`` gives the reference verdict (status, error) by other means: the
    harness's jaxpr evaluated in float64 (JAX's own catalog); "skipped" is no verdict."""
    import jax

    timer = Timer()
    facts: dict[str, Any] = {"lowered_on": prior.meta.get("jax_version"),
                             "lowered_platforms": prior.meta.get("platforms"),
                             "run_on_jax": jax.__version__}
    actual = _run_artifact(prior, platform, facts, timer)
    if isinstance(actual, CrossHost):
        return actual
    identical = dyn is not None and same_inputs(prior.inputs, dyn)
    facts["inputs_identical"] = identical
    metrics: dict[str, float] = {"xhost_s": timer.seconds}
    tol = (rtol, atol, exact, promised)
    try:
        verdicts = _verdicts(actual, prior, native if identical else None, reference if identical else None,
                             judge if identical else None, invariant if identical else None, tol, facts, metrics)
    except Exception as e:  # a comparison that cannot even be made is an error, not a crash
        return failure(CrossHost, "xhost", platform, e, timer.seconds, facts=facts)
    worst, first_err = "ok", None
    for label, (st, err) in verdicts.items():
        if SEVERITY[st] > SEVERITY[worst]:
            worst, first_err = st, f"vs {label.replace('_', ' ')}: {err}"
    return CrossHost("xhost", platform, worst, timer.seconds, error=first_err,
                     error_type="Mismatch" if first_err else None, metrics=metrics,
                     facts={**facts, "rtol": rtol, "atol": atol, "exact": exact})


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


def _verdicts(actual: list[np.ndarray], prior: Prior, native: list[np.ndarray] | None,
              reference: list[np.ndarray] | None, judge: Callable[[list[np.ndarray]], tuple[str, str | None]] | None,
              invariant: Callable[[list[np.ndarray]], tuple[float, float]] | None, tol: tuple[float, float, bool, Any],
              facts: dict[str, Any], metrics: dict[str, float]) -> dict[str, tuple[str, str | None]]:
    """{comparison: (status, error)} of the artifact's outputs against the lowering host's
    outputs, this host's own lowering and the reference (the invariant's alone where the
    result is not unique); facts and metrics are filled in as they are made. ``native``,
    ``reference``, ``judge`` and ``invariant`` are None where the inputs differ."""
    rtol, atol, exact, promised = tol
    verdicts: dict[str, tuple[str, str | None]] = {}
    for label, expected in (("cpu_host", prior.outputs), ("native", native), ("reference", reference)):
        if label == "reference" and expected is None and judge is not None:
            st, err = judge(actual)
            facts["vs_reference"], facts["reference_by"] = st, "jaxpr"
            if st != "skipped":
                verdicts[label] = (st, err)
            continue
        if expected is None:
            facts[f"vs_{label}"] = "skipped"
            continue
        counts: dict[str, int] = {}
        st, err, m = compare_outputs(actual, list(expected), rtol, atol, exact, promised, counts)
        facts[f"vs_{label}"] = st
        if counts.get("bad"):
            facts[f"{label}_disagreement"] = counts
        metrics.update({f"{label}_{k}": v for k, v in m.items()})
        verdicts[label] = (st, err)
    if native is not None:  # this host's own lowering against the lowering host's outputs (same inputs)
        st, _, m = compare_outputs(list(native), list(prior.outputs), rtol, atol, exact, promised)
        facts["native_vs_cpu_host"] = st
        metrics.update({f"native_cpu_host_{k}": v for k, v in m.items()})
    if invariant is not None:
        err_inv, bound = invariant(actual)
        metrics.update(invariant_err=err_inv, invariant_bound=bound)
        ok = err_inv <= bound
        facts["vs_invariant"] = "ok" if ok else "fail"
        verdicts = {"invariant": ("ok", None) if ok else ("fail", f"invariant error {err_inv:.3g} > {bound:.3g}")}
    return verdicts
