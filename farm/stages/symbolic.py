"""symbolic: a harness's symbolic variant (``farm.stages.variants``: its own declared specs,
or a leading ``b`` and symbolic inner dimensions) exported for every platform, serialized,
and called at several concrete sizes. A symbolic module is where
export bugs cluster: ``shape_assertion`` custom calls, ``stablehlo.dynamic_*`` ops, shape
refinement at call time.

- ``export``: one multi-platform export; where it fails, one per platform, so the records
  say which platform sinks it (the tpu lowering of eigh with symbolic matrix dimensions
  sinks the whole four-platform export although cpu and cuda lower);
- ``serialize``: the round trip, and what the symbolic module carries (``census``);
- ``calls``: the deserialized artifact called at each point on the CPU backend (and at each
  point that breaks a constraint, where it must raise), and each
  other platform's own symbolic module, refined to the same size and run by the CPU
  backend (as crossexec runs static modules). Whether the outputs are right is the
  judge's (``farm.judge.symbolic``).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.results import LOWERING_PLATFORMS, Record
from farm.stages import compat
from farm.stages.compile import check_options, checked_call, checked_calls, not_runnable
from farm.stages.parts import LOCATIONS, module_text, relabelled
from farm.stages.record import Timer, failure
from farm.stages.variants import FIRST_ONLY, SIZES, Variant, label, variant, widen

__all__ = ["FIRST_ONLY", "SIZES", "SymbolicCall", "SymbolicExported", "Variant", "call", "export_all",
           "call_together", "export_one", "serialize", "shared_call", "variant", "widen", "widened"]
#: What a call that breaks a constraint must raise: JAX's check of the arguments' shapes
#: against the specification, or the module's own shape assertion.
SHAPE_ASSERTION = re.compile(r"Input shapes do not match|shape assertion|shape_assertion")

#: What a symbolic module carries that a static one does not.
DYNAMIC_OPS = re.compile(r"stablehlo\.(dynamic_\w+|real_dynamic_slice)|@shape_assertion")


@dataclass(frozen=True, slots=True)
class SymbolicExported(Record):
    """stage ``symbolic_export``; facts: the specs, the platforms exported; ``handle``: the
    ``jax.export.Exported``."""


@dataclass(frozen=True, slots=True)
class SymbolicCall(Record):
    """stage ``symbolic_call`` for one platform's module; ``handle``: {size: outputs}."""


def _structs(v: Variant) -> list[Any]:
    import jax
    from jax import export

    scope = export.SymbolicScope(v.constraints)
    return [jax.ShapeDtypeStruct(export.symbolic_shape(s, scope=scope), np.dtype(d)) for s, d in zip(v.specs, v.dtypes)]


def export_all(v: Variant, platforms: tuple[str, ...] = LOWERING_PLATFORMS,
               done: dict[str, SymbolicExported] | None = None) -> list[SymbolicExported]:
    """The multi-platform export (platform ``export``); where it fails, one export per platform
    as well, each its own record. ``done``: those of them made already while widening, by
    label, the same specs and constraints."""
    done = done or {}
    rec = done.get("export") or export_one(v, platforms, "export")
    if rec.status == "ok" or len(platforms) == 1:
        return [rec]
    own = [done.get(p) or export_one(v, (p,), p) for p in platforms]
    sunk = [r.platform for r in own if r.status != "ok"]
    return [rec.with_status(rec.status, facts={**rec.facts, "sunk_by": sunk})] + own


def export_one(v: Variant, platforms: tuple[str, ...], label: str) -> SymbolicExported:
    import jax
    from jax import export

    timer = Timer()
    facts = {"specs": list(v.specs), "platforms": list(platforms), "kind": v.kind, **v.facts}
    if v.constraints:
        facts["constraints"] = list(v.constraints)
    try:
        with timer():
            exp = export.export(jax.jit(v.fun), platforms=platforms)(*_structs(v))
        return SymbolicExported("symbolic_export", label, "ok", timer.seconds, facts=facts, handle=exp)
    except Exception as e:
        return failure(SymbolicExported, "symbolic_export", label, e, timer.seconds, facts=facts, handle=e)


def serialize(rec: SymbolicExported) -> Record:
    """The round trip of a symbolic artifact and what its module carries."""
    import hashlib

    from jax import export

    if rec.status != "ok":
        return Record("symbolic_serialize", rec.platform, "skipped", error="the symbolic export did not succeed")
    timer = Timer()
    try:
        with timer():
            blob = bytes(rec.handle.serialize())
            back = export.deserialize(bytearray(blob))
        # by shape, dtype and memory space, as the static round trip compares them: the format writes no
        # weak type (jnp.ndim's weak int32 comes back strong; farm.stages.export._AVAL_NOT_CARRIED)
        same = [_aval_key(a) for a in back.in_avals] == [_aval_key(a) for a in rec.handle.in_avals] and \
            [_aval_key(a) for a in back.out_avals] == [_aval_key(a) for a in rec.handle.out_avals]
        ops = DYNAMIC_OPS.findall(module_text(rec.handle))
        census = {op or "shape_assertion": ops.count(op) for op in sorted(set(ops))}
        facts = {"sha256": hashlib.sha256(blob).hexdigest(), "dynamic_ops": census,
                 "in_avals": [str(a) for a in back.in_avals], "out_avals": [str(a) for a in back.out_avals]}
        if not same:
            facts["changed"] = ["in_avals or out_avals"]
        weak = [str(a) for a in (*rec.handle.in_avals, *rec.handle.out_avals) if getattr(a, "weak_type", False)]
        if weak:
            facts["not_carried"] = {"weak_type": weak}
        return Record("symbolic_serialize", rec.platform, "ok", timer.seconds,
                      metrics={"artifact_bytes": float(len(blob))}, facts=facts, handle=back)
    except Exception as e:
        return failure(Record, "symbolic_serialize", rec.platform, e, timer.seconds)


def _aval_key(aval: Any) -> tuple[str, ...]:
    """``compat.aval_key`` as text: symbolic dimensions of two scopes (the export's and the
    deserialized one's) compare by what they say."""
    return tuple(map(str, compat.aval_key(aval)))


def widened(v: Variant, platforms: tuple[str, ...] = LOWERING_PLATFORMS) -> tuple[Variant, dict[str, SymbolicExported]]:
    """``v`` with its inner dimensions symbolic where the exports accept them (``widen``),
    and the exports its attempts made of the variant it settled on, by label (the
    multi-platform export, ok or not, and the cpu's own: ``export_all`` reuses them)."""
    made: list[tuple[Variant, SymbolicExported]] = []

    def attempt(cand: Variant, everywhere: bool) -> Exception | None:
        label = "export" if everywhere else "cpu"
        rec = export_one(cand, platforms if everywhere else ("cpu",), label)
        made.append((cand, rec))
        return None if rec.status == "ok" else rec.handle  # the exception

    out = widen(v, attempt)
    return out, {rec.platform: rec for cand, rec in made if cand.specs == out.specs and cand.constraints == out.constraints}


def call(exported: Any, platform: str, v: Variant, points: tuple[Any, ...] | None = None, *,
         native: bool = False, artifact: str = "exported") -> SymbolicCall:
    """``exported`` (a symbolic artifact) called at each point on the CPU backend, and at each
    point that breaks a constraint (it must raise); a module for another platform is
    relabelled for the CPU first, so jax refines its symbolic shapes to the call's and the
    CPU backend compiles it (``native``: called as it is, on this host's device for its
    platform; ``artifact``: "deserialized" where it went through a round trip). ``handle``:
    {point label: outputs}; ``facts.violations``: {label: the error
    raised, or None where the call returned}."""
    import jax

    here = exported if native or "cpu" in exported.platforms else relabelled(exported, platform)
    points = v.points if points is None else points
    timer = Timer()
    outs: dict[str, list[np.ndarray]] = {}
    facts = _facts(v, points, artifact)
    raised: dict[str, str] = {}
    try:
        with timer():
            try:  # every size in one program: one compile
                rows = [v.rows(pt) for pt in points]
                for pt, got in zip(points, checked_calls(here.call, rows)):
                    outs[label(pt)] = [np.asarray(o) for o in jax.tree.leaves(got)]
                facts["batched"] = True
            except Exception:  # noqa: BLE001  one size raises: each on its own, to see which
                outs = {}
            for k, pt in enumerate(points):
                if label(pt) in outs:
                    continue
                try:
                    res = checked_call(here.call, *v.rows(pt))
                except Exception as e:
                    if k == 0:  # at the harness's own sizes: the artifact does not run at all
                        raise
                    raised[label(pt)] = f"{type(e).__name__}: {str(e)[:300]}"  # the judge asks whether it should
                    continue
                outs[label(pt)] = [np.asarray(o) for o in jax.tree.leaves(res)]
            if v.violations:
                facts["violations"] = {label(pt): _violation(here, v, pt) for pt in v.violations}
        if raised:
            facts["raised"] = raised
        return SymbolicCall("symbolic_call", platform, "ok", timer.seconds, facts=facts, handle=outs)
    except Exception as e:
        rec = failure(SymbolicCall, "symbolic_call", platform, e, timer.seconds, facts={**facts, "reached": sorted(outs)})
        return not_runnable(rec, str(e))  # a platform's custom call with no CPU handler


class ApartLost(Exception):
    """A call made apart (``call_apart``) whose process died or hung: what its record says."""

    def __init__(self, why: str, *, hung: bool, seconds: float, facts: dict[str, Any]) -> None:
        super().__init__(why)
        self.hung, self.seconds, self.facts = hung, seconds, facts


def call_apart(exported: Any, platform: str, v: Variant, *, artifact: str = "exported") -> SymbolicCall:
    """``platform``'s part of ``exported`` (a multi-platform artifact, or the platform's own)
    called as ``call`` calls it, in a process of its own (``farm.stages.symbolic_apart``): for a platform whose
    module is known to abort the process compiling it. Raises ``ApartLost`` where the process dies
    (the child's check failure its error) or hangs; the sizes that break a constraint are not called."""
    from farm.stages import symbolic_apart

    here = relabelled(exported, platform)  # ``platform``'s part, which the CPU then runs
    timer = Timer()
    facts = {**_facts(v, v.points, artifact), "apart": True}
    try:
        with timer():
            outs, raised = symbolic_apart.call(here, [(label(pt), v.rows(pt)) for pt in v.points])
    except (RuntimeError, TimeoutError) as e:  # the process died or hung: the judge makes that call's record
        raise ApartLost(str(e), hung=isinstance(e, TimeoutError), seconds=timer.seconds, facts=facts) from None
    if label(v.points[0]) in raised:  # at the harness's own sizes: the artifact does not run at all
        return SymbolicCall("symbolic_call", platform, "error", timer.seconds, error=raised[label(v.points[0])],
                            facts=facts)
    if raised:
        facts["raised"] = raised
    return SymbolicCall("symbolic_call", platform, "ok", timer.seconds, facts=facts, handle=outs)


def _facts(v: Variant, points: tuple[Any, ...], artifact: str) -> dict[str, Any]:
    """What every call record says: its sizes, specs, artifact and compiler options."""
    return {"sizes": [label(p) for p in points], "specs": list(v.specs), "artifact": artifact,
            "compiler_options": check_options()}


def call_together(back: Any, live: Any, platforms: tuple[str, ...], v: Variant) -> dict[str, SymbolicCall] | None:
    """Every platform's part of a multi-platform artifact whose parts compute differently,
    called at every size in one program (one compile, not one per platform): the cpu's from
    the deserialized artifact (``back``), another platform's from the live export relabelled,
    as ``call`` makes them; each platform its own outputs. None where anything in it raises (a
    part the CPU cannot compile, a size that raises): the caller then calls each platform on
    its own, to see which."""
    import jax

    heres = {p: back if p == "cpu" else relabelled(live, p) for p in platforms}
    timer = Timer()
    try:
        with timer():
            rows = [v.rows(pt) for pt in v.points]
            parts = [heres[p].call for p in platforms]
            results = checked_calls(parts[0], rows, *parts[1:]) if len(parts) > 1 else \
                [(r,) for r in checked_calls(parts[0], rows)]
            outs: dict[str, dict[str, list[np.ndarray]]] = {p: {} for p in platforms}
            for pt, r in zip(v.points, results):
                for p, got in zip(platforms, r):
                    outs[p][label(pt)] = [np.asarray(o) for o in jax.tree.leaves(got)]
    except Exception:  # noqa: BLE001
        return None
    made = {}
    for p in platforms:
        facts = {**_facts(v, v.points, "deserialized" if p == "cpu" else "exported"),
                 "batched": True, "together": list(platforms)}
        if v.violations:
            facts["violations"] = {label(pt): _violation(heres[p], v, pt) for pt in v.violations}
        made[p] = SymbolicCall("symbolic_call", p, "ok", timer.seconds / len(platforms), facts=facts, handle=outs[p])
    return made


def module_digest(exported: Any) -> str:
    """The digest of a platform's symbolic module without its source locations: two
    platforms whose lowerings are the same text give the same outputs when the CPU backend
    runs them, so the second reuses the first's call (``same_module_as``). Anything else
    that differs (an op, an attribute, a constant) makes it called on its own."""
    import hashlib

    return hashlib.sha256(LOCATIONS.sub("", module_text(exported)).encode()).hexdigest()


def same_call(first: SymbolicCall, platform: str) -> SymbolicCall:
    """``first``'s outputs, for a platform whose module is the same text."""
    return dataclasses.replace(first, platform=platform, seconds=0.0,
                               facts={**first.facts, "same_module_as": first.platform})


def shared_call(first: SymbolicCall, platform: str, exported: Any, v: Variant) -> SymbolicCall:
    """``first``'s outputs (the cpu's call of a module with no platform branch: every platform's
    part is the same computation) for ``platform``, with the calls that break a constraint
    made again with ``exported`` (the live artifact, which keeps its constraints: a
    deserialized one has lost them). Those calls stop at JAX's check of the arguments, before
    any compile."""
    shared = same_call(first, platform)
    facts = {**shared.facts, "artifact": "exported"}
    if v.violations:
        here = relabelled(exported, platform)
        facts["violations"] = {label(pt): _violation(here, v, pt) for pt in v.violations}
    return dataclasses.replace(shared, facts=facts)


def _violation(exported: Any, v: Variant, pt: Any) -> str | None:
    """The error a call at a point that breaks a constraint raised (None: it returned)."""
    try:
        checked_call(exported.call, *v.rows(pt))
        return None
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:300]}"
