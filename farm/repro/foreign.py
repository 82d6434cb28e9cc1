"""Reproducers for another host's or jax version's artifact (the ``xhost`` stage).

An xhost failure is a serialized ``jax.export`` artifact made elsewhere (another jax
version in a version sweep, the CPU host for a device host) that this side cannot
deserialize, or whose outputs disagree with the exporter's or with the float64 reference.
The script carries the artifact itself (``export.bin``), the exporter's inputs and outputs
and, where the harness is known here and the inputs are the same, the reference; it runs
``jax.export.deserialize(bytes).call(*inputs)`` and judges every side. It is checked with
the failing version's Python (exit 1) and, where one is given, the exporter's (exit 0: the
artifact agrees with itself there). The stored run is read by ``farm repro``'s command
module (this package does not import the store): it hands over a ``Foreign``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import FarmError
from farm.repro.case import find, policy_check, reference
from farm.repro.script import Check, Script
from farm.repro.write import Written, npz, verify
from farm.results import LOST


@dataclass(frozen=True)
class Foreign:
    """An artifact made elsewhere and what the stored run recorded of running it here."""

    export: bytes
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]  # the exporter's
    record: dict[str, Any]  # the failing xhost record: stage, platform, status, error_type, error, facts
    run: str  # the stored run that recorded the failure
    exporter: str  # the stored run that made the artifact
    exported_on: str | None = None  # jax versions
    run_on: str | None = None
    pythons: dict[str, str] = field(default_factory=dict)  # jax version -> an interpreter that has it


@dataclass(frozen=True)
class ForeignReport:
    """What was written, and what the script gave under each Python it was run with."""

    out: Path
    harness: str
    record: dict[str, Any]
    runs: list[tuple[str, Written]]  # (which jax, what the script gave there); the failing version first


def _settings(arrays: list[np.ndarray]) -> dict[str, str]:
    """x64 on where the artifact takes or gives a 64-bit value (jax refuses them otherwise)."""
    wide = any(np.dtype(a.dtype) in (np.int64, np.uint64, np.float64, np.complex128) for a in arrays)
    return {"JAX_ENABLE_X64": "1"} if wide else {}


def _reference_sides(catalog: str, modules: tuple[str, ...], name: str, f: Foreign, out: Path
                     ) -> tuple[list[tuple[Check, str]], set[int], str]:
    """The float64 reference side (and an invariant side for non-unique outputs), where the
    harness is known here and traces to the artifact's inputs; the outputs the invariant judges
    (no other side compares them: two correct versions may differ in signs); else none, and why."""
    import jax

    from farm.repro.candidate import traced_program
    from farm.repro.write import invariant_side
    from farm.stages import compat
    from farm.stages.xhost import same_inputs

    try:
        h = find(catalog, modules, name)
    except FarmError:
        return [], set(), f"no harness {name} in this jax's {catalog} catalog: no reference side"
    with compat.enable_x64(h.needs_x64 or bool(jax.config.jax_enable_x64) or bool(_settings(f.inputs))):
        program, dyn = traced_program(h)
        if not same_inputs(f.inputs, dyn):
            return [], set(), "the harness makes other inputs here than the exporter's: no reference side"
        facts = dict(f.record.get("facts") or {})
        if h.reference is not None:
            from farm.reference.handwritten import reference_outputs

            wants = [[np.asarray(r)] for r in reference_outputs(h, h.make_args()) or []]
            chk = Check("values", "the harness's float64 reference", float(facts.get("rtol", 0.0)),
                        float(facts.get("atol", 0.0)), exact=bool(facts.get("exact")))
        else:
            from farm.judge import judge_jaxpr as judge

            verdict = judge(program.closed, dyn, list(f.outputs))
            chk, wants = policy_check(verdict.facts), reference(program.closed, dyn)
        more = invariant_side(h.name, program.closed, dyn, chk, out)
    judged = set(more[0][0].invariant["outputs"].values()) if more else set()
    wants = [[] if k in judged else alts for k, alts in enumerate(wants)]
    npz(out / "reference.npz", {f"out{i}_{j}": a for i, alts in enumerate(wants) for j, a in enumerate(alts)})
    counts = [len(a) for a in wants]
    src = (f'(lambda z: [[z[f"out{{i}}_{{j}}"] for j in range(k)] if k else None for i, k in enumerate({counts})])'
           f'(load("reference.npz"))')
    return [(chk, src), *more], judged, ""


def reproduce_foreign(catalog: str, modules: tuple[str, ...], name: str, out: Path, f: Foreign) -> ForeignReport:
    """Write ``out``/repro.py for the xhost failure ``f`` of harness ``name`` and run it with
    the failing version's Python and the exporter's."""
    rec = f.record
    status = rec.get("status")
    out.mkdir(parents=True, exist_ok=True)
    (out / "export.bin").write_bytes(f.export)
    npz(out / "inputs.npz", {f"in{i}": a for i, a in enumerate(f.inputs)})
    facts = dict(rec.get("facts") or {})
    a, b = f.exported_on or "the exporter", f.run_on or "this side"
    notes: list[str] = []
    more: list[tuple[Check, str]] = []
    judged: set[int] = set()  # outputs only the invariant judges
    if status in LOST:
        chk = Check("crash" if status == "crashed" else "timeout")
    elif status == "error":
        chk = Check("error", f"the error jax {b} raised", error_type=rec.get("error_type"),
                    match_type=bool(rec.get("error_type")))
    else:
        chk = Check("values", f"jax {a}'s own outputs (the exporter's)", float(facts.get("rtol", 0.0)),
                    float(facts.get("atol", 0.0)), exact=bool(facts.get("exact")))
        more, judged, why = _reference_sides(catalog, modules, name, f, out)
        if why:
            notes.append(why)
    npz(out / "expected.npz", {f"out{i}_0": o for i, o in enumerate(f.outputs) if i not in judged})
    exporter = (f'(lambda z: [[z[f"out{{i}}_0"]] if f"out{{i}}_0" in z else None for i in range({len(f.outputs)})])'
                f'(load("expected.npz"))')
    requirements = [f"jax=={f.run_on}" if f.run_on else "jax", f"jaxlib=={f.run_on}" if f.run_on else "jaxlib",
                    "numpy", "flatbuffers  # jax.export.deserialize needs it (an optional dependency of jax)"]
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
    (out / "environment.json").write_text(json.dumps(
        {"harness": name, "catalog": catalog, "failure": rec, "run": f.run, "exporter": f.exporter,
         "exported_on": f.exported_on, "run_on": f.run_on, "artifact_bytes": len(f.export)},
        indent=1, default=str) + "\n")
    error = f"{rec.get('error_type') or ''}: {rec.get('error') or ''}"[:600]
    compared = ", ".join(f"{k} {v}" for k, v in facts.items() if k.startswith("vs_"))
    story = (f"The farm's harness {name} ({catalog} catalog): its serialized jax.export artifact, made by jax {a}\n"
             f"(run {f.exporter}), deserialized and run by jax {b} (run {f.run}): xhost {status}.\n"
             f"The farm saw: {error}\n"
             + (f"The comparisons the farm made: {compared}.\n" if compared else "")
             + "Generated by `farm repro`; the computation is the artifact itself (export.bin).")
    script = Script(
        title=f"Reproducer for {name}: jax {a}'s artifact run by jax {b}, xhost {status}",
        story=story, settings=_settings(list(f.inputs) + list(f.outputs)), platform=str(rec.get("platform") or "cpu"),
        check=chk, code=None, inputs=f'[load("inputs.npz")[f"in{{i}}"] for i in range({len(f.inputs)})]',
        expected=exporter,
        notes=notes, more=more,
        header=f"Needs only jax, jaxlib, numpy and flatbuffers (requirements.txt: jax=={f.run_on or 'V'} fails; "
               f"jax=={f.exported_on or 'V'}, the exporter, runs its own artifact).")
    path = out / "repro.py"
    path.write_text(script.render())
    runs = [(f.run_on or "here", verify(path, python=f.pythons.get(f.run_on or "")))]
    if f.exported_on and f.exported_on != f.run_on and f.exported_on in f.pythons:
        runs.append((f.exported_on, verify(path, python=f.pythons[f.exported_on])))
    return ForeignReport(out, name, rec, runs)
