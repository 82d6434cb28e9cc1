"""A symbolic-shape failure (``farm sweep --shapes symbolic``) as a standalone script.

The script maps the harness's function over a leading dimension ``b``, exports it with
symbolic shapes (``jax.export.symbolic_shape`` of the specs the farm's record names) for
the failing platform, serializes and deserializes it, and calls it at the size the farm
saw fail (another platform's module relabelled for the CPU, as the farm's
``symbolic_call`` runs it); the outputs are judged against the float64 reference of the
same computation at that size and against the static jit of it there, or the export or
call must still raise. It exits 1 while the failure is there.

A planted fault (``FARM_PLANT``) lives in the farm's lowering rules, which a script that
imports only jax does not have: there the script calls the farm's own symbolic artifact
(``symbolic_export.bin``), exported by a worker with the fault in force, as the static
reproducers call ``export.bin``; ``f`` is still written out, for the static side.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from farm.analysis.shapes import failing_size
from farm.catalog.specs import label, parse_label
from farm.errors import FarmError
from farm.repro import emit
from farm.repro.candidate import Worker
from farm.repro.case import Case, policy_check, reference
from farm.repro.script import Check, Script
from farm.repro.write import Written, _environment, _story, header, invariant_side, npz, verify, write_needs
from farm.results import LOWERING_PLATFORMS

#: The symbolic export the script makes itself: f mapped over b, with the farm's specs.
EXPORT_CODE = '''
SPECS = {specs}  # per argument, the farm's symbolic shape (b: the mapped dimension, where IN_AXES maps)
CONSTRAINTS = {constraints}  # the symbolic constraints the farm exported with
DTYPES = {dtypes}
IN_AXES = {in_axes}  # which arguments are mapped over b (None: f is called as it is)
PLATFORMS = {platforms}  # what the module is exported for
SIZE = {size!r}  # the sizes of the dimension variables the farm saw fail at


def mapped():
    return f if IN_AXES is None else jax.vmap(f, in_axes=IN_AXES)


def export_symbolic():
    """f (mapped over b), exported with symbolic shapes (jax.export.symbolic_shape)."""
    scope = jax.export.SymbolicScope(CONSTRAINTS)
    args = [jax.ShapeDtypeStruct(jax.export.symbolic_shape(s, scope=scope), jnp.dtype(d)) for s, d in zip(SPECS, DTYPES)]
    return jax.export.export(jax.jit(mapped()), platforms=PLATFORMS)(*args)
'''
#: The farm's own symbolic artifact, where a planted fault lives in the farm's lowering.
ARTIFACT_CODE = '''
IN_AXES = {in_axes}  # which arguments are mapped over b (None: f is called as it is)
SIZE = {size!r}  # the sizes of the dimension variables the farm saw fail at


def mapped():
    return f if IN_AXES is None else jax.vmap(f, in_axes=IN_AXES)


def export_symbolic():
    """The farm's symbolic export (symbolic_export.bin: made with the planted fault in force;
    deserializing it needs the flatbuffers package too)."""
    return jax.export.deserialize(bytearray((HERE / "symbolic_export.bin").read_bytes()))
'''
CALL_CODE = '''

def prepare(inputs):
    """The symbolic export through a serialize/deserialize round trip, as the farm makes it;
    another platform's module relabelled for the CPU, so jax refines its symbolic shapes to
    the call's and the CPU backend runs it (the farm's symbolic_call)."""
    exported = jax.export.deserialize(bytearray(export_symbolic().serialize()))
    print(f"exported for {', '.join(exported.platforms)} with symbolic shapes "
          f"{', '.join(str(a) for a in exported.in_avals)}; called at {SIZE}")
    if native():
        return exported.call
    if "cpu" not in exported.platforms:
        import dataclasses
        exported = dataclasses.replace(exported, platforms=("cpu",))
    cpu = jax.devices("cpu")[0]

    def call(*xs):
        with jax.default_device(cpu):
            return exported.call(*xs)
    return call


def static_at_size():
    """The static jit of the (mapped) f at SIZE: what the symbolic call must agree with."""
    return [[np.asarray(o)] for o in jax.tree.leaves(jax.jit(mapped())(*INPUTS()))]
'''


def _code(v: Any) -> str | None:
    """One row's function as ``jax.lax`` code (``def f``), or None where it has no source form."""
    import jax

    from farm.repro.flat import flatten

    if v.kind == "declared":
        row = v.rows(v.points[0])
    else:
        mapped = v.mapped or (True,) * len(v.specs)
        row = [r[0] if m else r for r, m in zip(v.rows(v.points[0]), mapped)]
    try:
        return emit.function(flatten(jax.make_jaxpr(v.one)(*row), row))
    except emit.Unemittable:
        return None


def _artifact(case: Case, platforms: tuple[str, ...], out: Path) -> str | None:
    """symbolic_export.bin, exported by a worker where ``FARM_PLANT`` is in force; None
    where that export fails (the error, as the worker saw it, is returned instead)."""
    with Worker(case.source, timeout_s=float(case.harness.timeout_s or 120)) as worker:
        kind, got = worker.ask("symbolic_export", platforms)
    if kind != "export":
        return str(got.get("error") or got)
    (out / "symbolic_export.bin").write_bytes(got)
    return None


def _sides(case: Case, v: Any, rows: list[np.ndarray], size: str, code: str | None,
           out: Path) -> tuple[Check, str, list[tuple[Check, str]]]:
    """(the main check, its expected side's source, further sides) of a numeric failure:
    the float64 reference of the mapped computation at ``size`` (expected.npz; the invariant
    of non-unique outputs) and, where the farm compared them, the script's own static jit."""
    import jax

    from farm.judge import declared, judge_jaxpr, of_harness, rtol_atol

    h, rec = case.harness, case.failure
    closed = jax.make_jaxpr(v.fun)(*rows)
    (out / "program.jaxpr").write_text(str(closed) + "\n")
    static = [np.asarray(o) for o in jax.tree.leaves(jax.jit(v.fun)(*rows))]
    verdict = judge_jaxpr(closed, rows, static, floor=declared(h, rec.platform))
    rtol, atol = rtol_atol(of_harness(h, rec.platform, str(static[0].dtype) if static else None))
    at_size = Check("values", f"the static jit at {size}", rtol, atol, exact=h.compare == "exact",
                    signed_zeros=False)
    if verdict.status == "skipped":
        if code is None:
            raise FarmError(f"{h.name}: no reference at {size} ({verdict.error}) and no source form for the static side")
        return at_size, "static_at_size()", []
    chk, expected = policy_check(dict(verdict.facts)), reference(closed, rows)
    more = invariant_side(h.name, closed, rows, chk, out)
    if more:  # those outputs are the invariant's: the values side leaves them out
        judged = more[0][0].invariant["outputs"].values()
        expected = [[] if k in judged else alts for k, alts in enumerate(expected)]
    if verdict.against == "reference" and code is not None:
        more.append((at_size, "static_at_size()"))
    npz(out / "expected.npz", {f"out{i}_{j}": a for i, alts in enumerate(expected) for j, a in enumerate(alts)})
    counts = [len(a) for a in expected]
    src = (f'(lambda z: [[z[f"out{{i}}_{{j}}"] for j in range(k)] if k else None for i, k in enumerate({counts})])'
           f'(load("expected.npz"))')
    return chk, src, more


def _check(case: Case) -> Check | None:
    """How the script judges a failure that is not a numeric one (None: a numeric one)."""
    rec = case.failure
    if rec.status == "crashed":
        return Check("crash", timeout_s=float(case.harness.timeout_s or 300))
    if rec.status == "timeout":
        return Check("timeout", timeout_s=float(case.harness.timeout_s or 60))
    if rec.stage != "symbolic_call" or rec.error_type != "Mismatch":
        return Check("error", error_type=rec.error_type)
    return None


def write_symbolic(case: Case, out: Path, name: str = "repro.py") -> Written:
    """The reproducer of a symbolic stage's failure (``case.failure``), run standalone."""
    from farm.stages import symbolic

    h, rec = case.harness, case.failure
    v = symbolic.variant(h)
    if isinstance(v, str):
        raise FarmError(f"{h.name}: no symbolic variant ({v})")
    specs = list(rec.facts.get("specs") or v.specs)
    if tuple(specs) != v.specs:  # the farm widened it: inner dimensions symbolic too
        v, _ = symbolic.widened(v)
    size = failing_size(rec.facts, rec.error) or label(v.points[0])
    rows = v.rows(parse_label(size))
    platforms = LOWERING_PLATFORMS if rec.platform not in LOWERING_PLATFORMS else (rec.platform,)
    code = _code(v)
    in_axes = None if v.kind == "declared" else tuple(0 if m else None for m in (v.mapped or (True,) * len(v.specs)))
    planted = bool(os.environ.get("FARM_PLANT"))
    notes: list[str] = []
    if planted or code is None:
        why = _artifact(case, platforms, out)
        if why is not None:
            if code is None or planted:
                raise FarmError(f"{h.name}: the symbolic export fails in the farm's worker ({why[:200]}) and "
                                + ("the planted fault it lives in is not the script's" if planted else
                                   "the function has no source form"))
        else:
            prepare = ARTIFACT_CODE.format(in_axes=in_axes, size=size)
            why_blob = ("The planted fault lives in the farm's lowering, so this calls the farm's own symbolic export"
                        if planted else "The function has no source form, so this calls the farm's own symbolic export")
            notes = [why_blob, f"(symbolic_export.bin, specs {specs} for {', '.join(platforms)})"
                               + (", made with the fault in force." if planted else ".")]
    if not notes:
        prepare = EXPORT_CODE.format(specs=tuple(specs), constraints=tuple(v.constraints), dtypes=tuple(v.dtypes),
                                     in_axes=in_axes,
                                     platforms=tuple(platforms), size=size)
    chk = _check(case)
    src, more = "[]", []
    if chk is None:
        chk, src, more = _sides(case, v, rows, size, code, out)
    npz(out / "inputs.npz", {f"in{i}": r for i, r in enumerate(rows)})
    extra = {"symbolic": {"specs": specs, "constraints": list(v.constraints), "size": size,
                          "in_axes": None if in_axes is None else list(in_axes), "platforms": list(platforms)}}
    (out / "environment.json").write_text(json.dumps(_environment(case, extra), indent=1, default=str) + "\n")
    if case.needs:
        write_needs(case.needs, out)
    script = Script(
        title=f"Reproducer for {h.name} with symbolic shapes: {rec.stage} on {rec.platform} {rec.status}",
        story=_story(case) + f"\nGenerated by `farm repro`: f{'' if in_axes is None else ' mapped over a leading dimension b'}, "
              f"exported with symbolic shapes\n{', '.join(repr(s) for s in specs)}, serialized, deserialized and called at "
              f"{size}.",
        settings=case.settings, platform=rec.platform, check=chk, code=code, notes=notes,
        inputs=f'[load("inputs.npz")[f"in{{i}}"] for i in range({len(rows)})]', expected=src, more=more,
        header=header(case.needs), prepare=prepare + CALL_CODE)
    path = out / name
    path.write_text(script.render())
    return verify(path, needs=case.needs)
