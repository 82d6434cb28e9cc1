"""A derivative failure (``farm sweep --vjp [1|2]``: a ``vjp`` or ``vjp2`` record) as a
standalone script.

The script exports the harness's function for the platforms the farm exported it for,
serializes it with ``vjp_order`` orders of vjp, deserializes it and takes the vjp of the
deserialized function at the point the farm drew (its inputs, output cotangents ``ct`` and,
for order 2, ``w``): on the CPU ``jax.vjp`` of ``Exported.call``, for cuda, rocm and tpu the
serialized vjp module with its platform labels swapped so the CPU backend runs that
platform's part (as ``farm.stages.gradients`` does). Each directional derivative the judge
checked (``farm.judge.gradients``: ``u·Jᵀct``; at order 2 ``u·∂x(w·Jᵀct)`` and ``c·(J w)``,
with the judge's own random directions) is held against central differences, extrapolated
over two steps, under the judge's bound; the script prints both numbers and exits 1 where one
disagrees.

The judge differences the farm's float64 reference evaluator (NumPy); a standalone script has
none, so it differences ``f`` (the harness's jaxpr written out as ``jax.lax`` code) in
float64 on the CPU under ``jax.enable_x64`` (``jax.experimental.enable_x64``
before jax 0.8), at the judge's steps.

Only ``fail`` records whose finite differences were judged are written: a failure judged
against ``jax.vjp`` alone, or a vjp that raised, says so (FarmError).

A planted fault (``FARM_PLANT=wrong_jvp:PRIM``) lives in the farm's JVP rules, which a
script that imports only jax does not have: there the script differentiates the farm's own
artifact (``vjp_export.bin``, exported and serialized with ``vjp_order`` by a worker with the
fault in force), as the static reproducers call ``export.bin``; ``f`` is still written out,
for the finite differences.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import FarmError
from farm.repro import emit
from farm.repro.candidate import Worker
from farm.repro.case import Case
from farm.repro.script import IMPORTS, LOAD_CODE, RUN_CODE, _literal
from farm.repro.write import Written, _environment, _story, header, npz, verify, write_needs
from farm.results import LOWERING_PLATFORMS

#: The script's own export: f for PLATFORMS, serialized with ORDER orders of vjp.
EXPORT_CODE = '''

def exported():
    """f exported for PLATFORMS and serialized with ORDER orders of vjp, then read back (the farm's vjp stage)."""
    blob = jax.export.export(jax.jit(f), platforms=PLATFORMS)(*primals()).serialize(vjp_order=ORDER)
    return jax.export.deserialize(bytearray(blob))
'''
#: The farm's own artifact, where a planted fault lives in the farm's JVP rules.
ARTIFACT_CODE = '''

def exported():
    """The farm's export serialized with ORDER orders of vjp (vjp_export.bin: made with the planted
    fault in force; deserializing it needs the flatbuffers package too)."""
    return jax.export.deserialize(bytearray((HERE / "vjp_export.bin").read_bytes()))
'''
MAIN_CODE = '''

def array(kind, i):
    """One array of the farm's point (point.npz); a float0 one (an integer input's or output's cotangent) rebuilt."""
    if f"{kind}{i}" in FLOAT0:
        return np.zeros(tuple(FLOAT0[f"{kind}{i}"]), dtype=jax.dtypes.float0)
    return POINT[f"{kind}{i}"]


def primals():
    return [array("x", i) for i in range(N_IN)]


def cotangents():
    """The input cotangents of the order-ORDER vjp of the deserialized artifact, as the farm takes them."""
    import dataclasses

    back = exported()
    args = primals() + ([array("ct", j) for j in range(N_OUT)] if ORDER == 2 else [])
    cts = [array("ct", j) for j in range(N_OUT)] if ORDER == 1 else [array("w", i) for i in range(N_IN)]
    print(f"exported for {', '.join(back.platforms)}, serialized with vjp_order={ORDER}; "
          f"{PLATFORM}'s order-{ORDER} vjp taken on the CPU")
    if PLATFORM == "cpu":  # the path a user takes: jax.vjp of the deserialized Exported.call
        fun = back if ORDER == 1 else back.vjp()

        def pullback(*a):
            _, pull = jax.vjp(fun.call, *a[:len(args)])
            return pull(jax.tree.unflatten(fun.out_tree, list(a[len(args):])))

        got = jax.jit(pullback)(*args, *cts)
    else:  # PLATFORM's part of the serialized vjp module, its label swapped with the cpu's so the CPU runs it
        vjp = back
        for _ in range(ORDER):
            vjp = vjp.vjp()
        ps = tuple(back.platforms)
        if "cpu" not in ps:
            swapped = ("cpu",) if len(ps) == 1 else tuple("cpu" if q == PLATFORM else q for q in ps)
        else:
            swapped = tuple("cpu" if q == PLATFORM else PLATFORM if q == "cpu" else q for q in ps)
        got = dataclasses.replace(vjp, platforms=swapped).call(*args, *cts)
    return [np.asarray(g) for g in jax.tree.leaves(got)]


def f64(steps):
    """f's floating outputs in float64 on the CPU (jax.enable_x64) at the primals moved by
    h·direction for each (h, direction) of steps: the farm's judge evaluates its float64 reference here."""
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # jax < 0.8
        from jax.experimental import enable_x64

    with enable_x64(True), jax.default_device(jax.devices("cpu")[0]):
        xs = [np.asarray(x, dtype=np.float64) if i in FLOATING else np.asarray(x) for i, x in enumerate(primals())]
        for h, d in steps:
            for i, v in d.items():
                xs[i] = xs[i] + h * v
        with np.errstate(all="ignore"):
            return [np.asarray(o, dtype=np.float64) if np.asarray(o).dtype.kind in "fc" else np.asarray(o)
                    for o in jax.tree.leaves(jax.jit(f)(*xs))]


def dot(weights, outs, absolute=False):
    with np.errstate(all="ignore"):
        return float(sum(np.sum(np.where(w != 0, np.abs(w * o) if absolute else w * o, 0.0))
                         for w, o in zip(weights, outs) if w is not None))


def first(weights, d, h):
    """(the central difference of Σ weight·f along d at step h, float64 rounding over the step)."""
    plus, minus = f64([(h, d)]), f64([(-h, d)])
    return (dot(weights, plus) - dot(weights, minus)) / (2 * h), NOISE * dot(weights, plus, True) / h


def mixed(weights, u, w, h):
    """(the mixed second difference of Σ weight·f along u and w, float64 rounding over the step)."""
    c = [f64([(a, u), (b, w)]) for a, b in ((h, h), (h, -h), (-h, h), (-h, -h))]
    value = (dot(weights, c[0]) - dot(weights, c[1]) - dot(weights, c[2]) + dot(weights, c[3])) / (4 * h * h)
    return value, NOISE * dot(weights, c[0], True) / (h * h)


def device(ws, got):
    """(Σ w·v, Σ|w·v|, Σ|w|·the smallest normal of v's dtype) over the artifact's cotangents v."""
    with np.errstate(all="ignore"):
        terms = [np.where(w != 0, w * np.asarray(got[i], dtype=np.float64), 0.0) for i, w in ws.items()]
        floor = sum(float(np.sum(np.abs(w))) * float(ml_dtypes.finfo(got[i].dtype).tiny) for i, w in ws.items())
        return float(sum(np.sum(t) for t in terms)), float(sum(np.sum(np.abs(t)) for t in terms)), floor


def check(what, dev, difference, h):
    """The judge's rule: the difference at h and h/2, Richardson-extrapolated; bound
    TOL·(|reference| + Σ|terms|) + the two steps' disagreement + float64 rounding + the flush floor."""
    coarse, _ = difference(h)
    fine, noise = difference(h / 2)
    ref = fine + (fine - coarse) / 3
    value, mag, floor = dev
    bound = TOL * (abs(ref) + mag) + abs(fine - coarse) + noise + floor
    if not (np.isfinite(coarse) and np.isfinite(fine)):
        print(f"{what}: not judged (the float64 function is not finite within a step)"); return False
    if abs(fine - coarse) > 0.25 * max(abs(fine), abs(coarse)) and abs(fine - coarse) > 8 * noise:
        print(f"{what}: not judged (the differences at two steps disagree: a jump within a step)"); return False
    bad = not abs(value - ref) <= bound
    print(f"{what}: the artifact's {value:.9g}, finite differences of f in float64 {ref:.9g} "
          f"(|difference| {abs(value - ref):.3g}, bound {bound:.3g}){': DISAGREE' if bad else ''}")
    return bad


def main():
    got = cotangents()
    u = {i: POINT[f"u{i}"] for i in FLOATING}
    cts = [np.asarray(array("ct", j), dtype=np.float64) if m else None for j, m in enumerate(MASK)]
    if ORDER == 1:
        failed = check("u·Jᵀct", device(u, got), lambda h: first(cts, u, h), STEPS[0])
    else:
        w = {i: np.asarray(POINT[f"w{i}"], dtype=np.float64) for i in FLOATING}
        c2 = [POINT.get(f"c{j}") for j in range(N_OUT)]
        failed = check("u·∂x(w·Jᵀct)", device(u, got[:N_IN]), lambda h: mixed(cts, u, w, h), STEPS[0])
        failed = check("c·(J w)", device({j: c for j, c in enumerate(c2) if c is not None}, got[N_IN:]),
                       lambda h: first(c2, w, h), STEPS[1]) or failed
    print("still fails" if failed else "fixed: the derivatives agree with finite differences")
    return 1 if failed else 0
'''


def _artifact(case: Case, platforms: tuple[str, ...], order: int, out: Path) -> str | None:
    """vjp_export.bin, made by a worker where ``FARM_PLANT`` is in force; the worker's error
    instead where that export fails."""
    with Worker(case.source, timeout_s=float(case.harness.timeout_s or 120)) as worker:
        kind, got = worker.ask("vjp_export", (platforms, order))
    if kind != "export":
        return str(got.get("error") or got)
    (out / "vjp_export.bin").write_bytes(got)
    return None


def write_gradients(case: Case, out: Path, name: str = "repro.py") -> Written:
    """The reproducer of a ``vjp``/``vjp2`` failure (``case.failure``), run standalone."""
    import jax

    from farm import judge
    from farm.pipeline.gradients import draw
    from farm.repro.flat import flatten
    from farm.stages import gradients, trace

    h, rec = case.harness, case.failure
    order = 2 if rec.stage == "vjp2" else 1
    checks = rec.facts.get("finite_differences")
    if rec.status != "fail" or not isinstance(checks, list):
        why = checks if isinstance(checks, str) else f"the record is {rec.status}"
        raise FarmError(f"{h.name}: {rec.stage} on {rec.platform}: only a failure against finite differences is "
                        f"written standalone yet ({why})")
    jf, dyn = trace.jitted(h, h.make_args())
    dyn = [np.asarray(d) for d in dyn]
    closed = jf.trace(*dyn).jaxpr
    try:
        code = emit.function(flatten(closed, dyn))
    except emit.Unemittable as e:
        raise FarmError(f"{h.name}: no source form for the finite differences ({e})") from None
    (out / "program.jaxpr").write_text(str(closed) + "\n")
    # the farm's point and directions, drawn as the pipeline and the judge draw them
    mask, _ = judge.differenced(closed)
    point = draw(dyn, closed, mask, order, np.random.default_rng(h.seed + 1))
    rng = np.random.default_rng(h.seed + 7 * order)
    u, _ = judge.directions(dyn, closed, rng)
    floating = [i for i, x in enumerate(dyn) if gradients.inexact(x)]
    c2 = {j: rng.standard_normal(np.shape(point.ct[j])) for j, m in enumerate(mask) if m} if order == 2 else {}
    arrays: dict[str, Any] = {}
    float0: dict[str, list[int]] = {}
    for kind, values in (("x", point.primals), ("ct", point.ct), ("w", point.w)):
        for i, v in enumerate(values):
            if gradients.inexact(v) or kind == "x":
                arrays[f"{kind}{i}"] = np.asarray(v)
            else:
                float0[f"{kind}{i}"] = list(np.shape(v))
    arrays.update({f"u{i}": v for i, v in u.items()})
    arrays.update({f"c{j}": v for j, v in c2.items()})
    npz(out / "point.npz", arrays)
    platforms = tuple(LOWERING_PLATFORMS)
    planted = bool(os.environ.get("FARM_PLANT"))
    notes: list[str] = []
    prepare = EXPORT_CODE
    if planted:
        why = _artifact(case, platforms, order, out)
        if why is not None:
            raise FarmError(f"{h.name}: the vjp export fails in the farm's worker ({why[:200]}) and the planted fault "
                            "it lives in is not the script's")
        prepare = ARTIFACT_CODE
        notes = ["The planted fault lives in the farm's JVP rules, so this differentiates the farm's own artifact",
                 f"(vjp_export.bin, exported for {', '.join(platforms)} and serialized with vjp_order={order}, made",
                 "with the fault in force); f is written out for the finite differences alone."]
    tol = float(rec.facts.get("tol") or 0.0)
    # the directional checks; the per-element one (a diagonal Jacobian's every cotangent) is not
    # written standalone yet: a failure seen by it alone does not reproduce here, and says so
    steps = [float(c["step"]) for c in checks if "step" in c]
    (out / "environment.json").write_text(json.dumps(_environment(case, {"vjp": {
        "order": order, "platforms": list(platforms), "tol": tol, "steps": steps, "planted": planted}}),
        indent=1, default=str) + "\n")
    if case.needs:
        write_needs(case.needs, out)
    title = f"Reproducer for {h.name}'s derivatives: {rec.stage} on {rec.platform} {rec.status}"
    story = (_story(case) + f"\nGenerated by `farm repro`: f exported for {', '.join(platforms)}, serialized with "
             f"vjp_order={order}, deserialized;\n{rec.platform}'s order-{order} vjp held against central finite "
             "differences of f in float64\n(jax.enable_x64 on the CPU, where the farm's judge "
             "evaluates its float64 NumPy reference)\nin the judge's directions, steps and bound.")
    parts = [
        "#!/usr/bin/env python3",
        f'"""{title}\n\n{story}\n\n{header(case.needs)} Exit 1 while the failure is there, 0 once it is fixed.\n"""',
        IMPORTS.format(settings=repr(case.settings)),
        f"PLATFORM = {rec.platform!r}  # whose part of the vjp module runs here",
        f"PLATFORMS = {platforms!r}  # what f is exported for",
        f"ORDER = {order}  # the vjp order (vjp_order of the serialization)",
        f"N_IN, N_OUT = {len(dyn)}, {len(point.ct)}",
        f"FLOATING = {floating!r}  # the inputs with a derivative",
        f"MASK = {mask!r}  # the outputs the finite differences see (a unique float64 value)",
        f"FLOAT0 = {_literal(float0)}  # float0 cotangents (integer and bool values), by shape",
        f"TOL = {tol!r}  # the judge's gradient tolerance (farm.judge.tolerance, kind gradient)",
        f"STEPS = {steps!r}  # the judge's difference steps",
        "NOISE = 16 * float(np.finfo(np.float64).eps)  # float64 rounding of an output, per unit of Σ|weight·output|",
        *(f"# {n}" for n in notes),
        LOAD_CODE,
        "\n" + code.rstrip() + "\n",
        prepare,
        '\nPOINT = load("point.npz")  # the farm\'s primals x, cotangents ct (and w), the judge\'s directions u (and c)\n',
        MAIN_CODE,
        RUN_CODE,
    ]
    path = out / name
    path.write_text("\n".join(parts))
    return verify(path, needs=case.needs)
