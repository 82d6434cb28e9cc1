"""``farm repro``'s library side: find a harness's failure, write its standalone
reproducer, and (``minimize=True``) delta-debug it to the smallest program and input that
fail the same way, written beside it."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import FarmError
from farm.repro import emit
from farm.repro.candidate import Worker, traced_program
from farm.repro.case import Case, policy_check, load, reference
from farm.repro.minimize import Minimized, NotReproduced, minimize
from farm.repro.same import same_failure
from farm.repro.script import Check, Script
from farm.repro.write import Written, _story, compact, correctly_rounded, header, npz, verify, write_full
from farm.repro.compositions import write_composition
from farm.repro.gradients import write_gradients
from farm.repro.symbolic import write_symbolic
from farm.results import GRADIENT_STAGES, LOST, SYMBOLIC_STAGES, Record

#: The failures the minimizer can judge candidates for: this host's own run of the program
MINIMIZABLE = ("trace", "lower", "compile", "execute", "compare")
#: Up to this many values (inputs and expected), a minimized script holds them in its text
INLINE = 24


@dataclass(frozen=True)
class Report:
    """What ``farm repro`` wrote and what running it standalone gave."""

    out: Path
    harness: str
    failure: Record
    full: Written
    minimized: Written | None = None
    search: Minimized | None = None


def reproduce(catalog: str, modules: tuple[str, ...], name: str, out: Path, *, platform: str | None = None,
              stored: dict[str, Any] | None = None, do_minimize: bool = False, timeout_s: float = 60.0,
              same: Callable[[dict[str, Any], dict[str, Any]], bool] = same_failure,
              shapes: tuple[str, ...] = ("static",), vjp: int = 0, stage: str | None = None) -> Report:
    """Write ``out``/repro.py (and with ``do_minimize`` the minimized one, the full one kept
    as repro_full.py); a failure of a symbolic stage is written by ``farm.repro.symbolic``
    (``shapes``: the kinds of shape the harness is run at to find its failure), and one of
    the derivatives' stages by ``farm.repro.gradients`` (``vjp``: the vjp order the harness
    is run with to find it, as ``farm sweep --vjp``).

    Raises:
        FarmError: an unknown harness, one that does not fail, or one whose failure cannot
            be written standalone (the message says why)."""
    import jax

    from farm.stages import compat

    case = load(catalog, modules, name, platform, stored, shapes=shapes, vjp=vjp, stage=stage)
    if do_minimize and (case.failure.stage not in MINIMIZABLE and case.failure.status not in LOST
                        or case.failure.platform not in ("cpu", "any")):
        raise FarmError(f"{name}: --minimize judges candidates on this host's own run; this failure is "
                        f"{case.failure.stage} on {case.failure.platform} (write it without --minimize)")
    out.mkdir(parents=True, exist_ok=True)
    with compat.enable_x64(case.harness.needs_x64 or bool(jax.config.jax_enable_x64)):
        if case.failure.stage in SYMBOLIC_STAGES:
            return Report(out, case.harness.name, case.failure, write_symbolic(case, out))
        if case.failure.stage == "composition":
            if do_minimize:
                raise FarmError(f"{name}: a composition failure is not minimized (write it without --minimize)")
            return Report(out, case.harness.name, case.failure, write_composition(case, out))
        if case.failure.stage in GRADIENT_STAGES:
            if do_minimize:
                raise FarmError(f"{name}: a {case.failure.stage} failure is not minimized (write it without --minimize)")
            return Report(out, case.harness.name, case.failure, write_gradients(case, out))
        program, dyn = traced_program(case.harness)
        full = write_full(case, program, dyn, out, "repro_full.py" if do_minimize else "repro.py")
        if not do_minimize:
            return Report(out, case.harness.name, case.failure, full)
        with Worker(case.source, timeout_s=float(case.harness.timeout_s or timeout_s)) as worker:
            try:
                m = minimize(program, dyn, worker, same)
            except NotReproduced as e:
                raise FarmError(f"{name}: cannot minimize: {e}") from None
            small = write_minimized(case, program, m, out, worker)
    return Report(out, case.harness.name, case.failure, full, small, m)


def write_minimized(case: Case, program: Any, m: Minimized, out: Path, worker: Worker) -> Written:
    """minimized.jaxpr, steps.json and the minimized repro.py (readable jax.lax code; the
    minimized program's own export where a planted fault lives in the farm's lowering)."""
    import jax

    f, names = program.function(m.best.keep, m.best.outs)
    args = [np.asarray(m.best.inputs[n]) for n in names]
    closed = jax.make_jaxpr(f)(*args)
    (out / "minimized.jaxpr").write_text(str(closed) + "\n")
    (out / "steps.json").write_text(json.dumps(m.to_dict(), indent=1, default=str) + "\n")
    try:
        code: str | None = emit.function(closed)
    except emit.Unemittable:
        code = None
    planted = bool(os.environ.get("FARM_PLANT"))
    rec = m.record
    prims = ", ".join(e.primitive.name for e in closed.jaxpr.eqns)
    elements = int(sum(a.size for a in args))
    title = (f"Minimized reproducer for {case.harness.name}: {len(closed.jaxpr.eqns)} equation(s) ({prims}), "
             f"{elements} input element(s)")
    story = (_story(case) + f"\nMinimized by `farm repro --minimize` in {m.seconds:.1f} s ({len(m.steps)} candidates "
             f"judged in isolated workers); the minimized program is {rec.get('stage')} {rec.get('status')}: "
             f"{rec.get('error') or ''}"[:400] + "\nThe unminimized reproducer is repro_full.py.")
    if rec.get("status") == "fail":
        chk, wants = policy_check(rec.get("facts") or {}), reference(closed, args)
    elif rec.get("status") in LOST:
        chk, wants = Check("crash" if rec["status"] == "crashed" else "timeout"), []
    else:
        chk, wants = Check("error", error_type=rec.get("error_type")), []
    path = out / "repro.py"
    scalar = all(a.ndim == 0 for a in args) and len(wants) == 1 and np.ndim(wants[0][0]) == 0
    if code is not None and not planted and chk.kind == "values" and scalar:
        exact = correctly_rounded(closed, args)
        how = "correctly rounded (mpmath, 300 bits)" if exact is not None else "the float64 reference"
        ref = [exact] if exact is not None else [wants[0][0]]
        path.write_text(compact(title, story, case.settings, code, args, ref + wants[0][1:], how, chk,
                                label=prims if len(closed.jaxpr.eqns) == 1 else "f", needs=header(case.needs)))
        return verify(path, needs=case.needs)
    notes: list[str] = []
    if planted or code is None:
        kind, blob = worker.ask("export", m.best)
        if kind != "export" and code is None:
            raise FarmError(f"{case.harness.name}: the minimized program does not export ({blob.get('error')})")
        if kind != "export":  # e.g. a planted host callback, which jax cannot serialize: the code, said so
            notes = ["The planted fault could not be exported with the program (" + str(blob.get("error"))[:80] + "):",
                     "this script runs the program without it."]
        else:
            (out / "min_export.bin").write_bytes(blob)
        if code is not None and kind == "export":
            notes = ["The planted fault lives in the farm's lowering, so this runs the minimized program's own",
                     "export (min_export.bin, made with the fault in force; deserializing it needs the flatbuffers",
                     "package too). What it computes:"] + \
                    [f"    {line}" for line in code.splitlines()]
            code = None
    if elements + sum(np.size(a) for alts in wants for a in alts) <= INLINE:  # small: the values in the script
        inputs = "[\n        " + ",\n        ".join(emit.array(a) for a in args) + "]"
        expected = "[" + ", ".join("[" + ", ".join(emit.array(a) for a in alts) + "]" for alts in wants) + "]"
    else:
        npz(out / "min_inputs.npz", {f"in{i}": a for i, a in enumerate(args)})
        npz(out / "min_expected.npz", {f"out{i}_{j}": a for i, alts in enumerate(wants) for j, a in enumerate(alts)})
        counts = [len(a) for a in wants]
        inputs = f'[load("min_inputs.npz")[f"in{{i}}"] for i in range({len(args)})]'
        expected = (f'(lambda z: [[z[f"out{{i}}_{{j}}"] for j in range(k)] for i, k in '
                    f'enumerate({counts})])(load("min_expected.npz"))') if counts else "[]"
    script = Script(title, story, case.settings, "cpu", chk, code, "min_export.bin", inputs=inputs,
                    expected=expected, notes=notes, header=header(case.needs))
    path.write_text(script.render())
    return verify(path, needs=case.needs)
