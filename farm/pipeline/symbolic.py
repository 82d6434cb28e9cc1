"""The symbolic variant of one harness, run through its stages and judged (``farm.stages.symbolic``,
``farm.judge.symbolic``): export for every platform (and per platform where that fails),
the serialize round trip and its census, and calls at each size: the deserialized
artifact on the CPU, every other platform's own symbolic module refined and run by the CPU
backend.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from farm.catalog import Harness
from farm.judge import lost_record, verdict
from farm.pipeline.apart import aborts
from farm.pipeline.check import Base, Produced, Run
from farm.results import LOWERING_PLATFORMS, Record, check_spec
from farm.stages import compat, symbolic
from farm.stages.parts import branched, module_text, relabelled
from farm.stages.record import failure


def run_symbolic(h: Harness, platforms: tuple[str, ...] = LOWERING_PLATFORMS) -> list[Record]:
    """Every record of ``h``'s symbolic variant, judged; one ``skipped`` record (with the
    reason) where it has none. Never raises: the harness's static records must survive."""
    try:
        return _run(h, platforms)
    except Exception as e:
        return [failure(Record, "symbolic_export", "export", e, 0.0)]


def _run(h: Harness, platforms: tuple[str, ...]) -> list[Record]:
    with compat.enable_x64(h.needs_x64), compat.jax_config(h.jax_config):
        try:
            v = symbolic.variant(h)
        except Exception as e:  # the harness's own arguments could not be made
            return [failure(Record, "symbolic_export", "export", e, 0.0)]
        if isinstance(v, str):
            return [Record("symbolic_export", "export", "skipped", error=f"no symbolic variant: {v}",
                           facts={"reason": v})]
        done = None
        if "cpu" in platforms:
            v, done = symbolic.widened(v, platforms)
        exported = symbolic.export_all(v, platforms, done)
        multi = exported[0]
        ser = verdict(symbolic.serialize(multi))
        recs: list[Record] = [*exported, ser]
        statics: dict[str, list[Any]] = {}  # the static lowering's outputs at each size, for every platform's call
        if ser.status == "ok" and "cpu" in platforms and multi.status == "ok":
            recs += _parts(ser.handle, multi.handle, v, platforms, statics)
        else:
            recs += _own_modules(v, platforms, {r.platform: r for r in exported[1:]}, ser, statics)
    return [r.with_status(r.status, handle=None) for r in recs]


#: A custom call into a GPU vendor library, which no CPU backend has a handler for.
_DEVICE_LIBRARY = re.compile(r"stablehlo\.custom_call\s+@(cusolver|cublas|cusparse|cu_|hipsolver|hipblas|hipsparse|hip_)")


def _parts(back: Any, live: Any, v: symbolic.Variant, platforms: tuple[str, ...],
           statics: dict[str, list[Any]]) -> list[Record]:
    """Every platform's part of the multi-platform artifact called at each size: the cpu's
    deserialized (``back``), another platform's in the live export (``live``: it keeps the
    constraints a round trip drops) relabelled so the CPU runs it, its own symbolic lowering
    inside the artifact's platform branches. Where no platform branch computes differently,
    the cpu's outputs are every platform's (``same_module_as``), each judged with its own
    tolerance, and only the calls that break a constraint are made again."""
    text = module_text(back)
    differs = branched(text)
    # the parts known to abort the process compiling them (jax 0.12's cuda/rocm chlo.scan) are called
    # in a process of their own, so the harness keeps its other records
    apart = {p for p in platforms if p != "cpu" and aborts(v.harness, p)} if differs else set()
    inside = tuple(p for p in platforms if p not in apart)
    # a part calling a GPU library (cuSOLVER, hipSOLVER) cannot compile on the CPU: no use trying
    together = symbolic.call_together(back, live, inside, v) \
        if differs and not _DEVICE_LIBRARY.search(text) else None
    if together is not None:  # one program for every platform's part (those known to abort apart)
        made = {**together, **{p: _apart(live, p, v) for p in apart}}
        return [verdict(made[p], v=v, statics=statics) for p in platforms]
    first = symbolic.call(back, "cpu", v, artifact="deserialized")
    recs: list[Record] = []
    for p in platforms:
        if p == "cpu":
            raw = first
        elif not differs and first.status == "ok":
            raw = symbolic.shared_call(first, p, live, v)
        elif p in apart:
            raw = _apart(live, p, v)
        else:
            raw = symbolic.call(relabelled(live, p), p, v)
        recs.append(verdict(raw, v=v, statics=statics))
    return recs


def _apart(exported: Any, platform: str, v: symbolic.Variant) -> Record:
    """``platform``'s call made in a process of its own; its death (or hang) that call's
    ``crashed`` (``timeout``) record, which the limitation judges as any failure."""
    try:
        return symbolic.call_apart(exported, platform, v)
    except symbolic.ApartLost as e:
        lost = lost_record("symbolic_call", platform, hung=e.hung, why=str(e))
        return symbolic.SymbolicCall.from_dict({**lost, "error_type": "Timeout" if e.hung else "Crashed",
                                                "seconds": e.seconds, "facts": e.facts})


def _own_modules(v: symbolic.Variant, platforms: tuple[str, ...], own: dict[str, Record], ser: Record,
                 statics: dict[str, list[Any]]) -> list[Record]:
    """Where the multi-platform artifact did not make it (an export sunk by one platform, a
    failed round trip): each platform's own symbolic module, exported alone, called; the cpu's
    deserialized artifact where there is one."""
    recs: list[Record] = []
    if ser.status == "ok" and "cpu" in platforms:
        recs.append(verdict(symbolic.call(ser.handle, "cpu", v, artifact="deserialized"), v=v, statics=statics))
    called: dict[str, symbolic.SymbolicCall] = {}
    for p in platforms:
        if p == "cpu" and ser.status == "ok":
            continue
        one = own.get(p) or symbolic.export_one(v, (p,), p)  # the platform's own module
        if one.status != "ok":
            if p not in own:
                recs.append(one)
            continue
        digest = symbolic.module_digest(one.handle)  # the same text as a platform already called: its outputs
        if digest in called:
            raw = symbolic.same_call(called[digest], p)
        elif p != "cpu" and aborts(v.harness, p):
            raw = _apart(one.handle, p, v)
        else:
            raw = symbolic.call(one.handle, p, v)
        called.setdefault(digest, raw)
        recs.append(verdict(raw, v=v, statics=statics))
    return recs


def census(harnesses: Sequence[Harness]) -> dict[str, Any]:
    """How many harnesses have a symbolic variant, how many declare their own, and why the
    others have none (``farm coverage --shapes symbolic``). Nothing is dropped silently."""
    skipped: dict[str, int] = {}
    made = declared = 0
    for h in harnesses:
        try:
            with compat.enable_x64(h.needs_x64):
                v = symbolic.variant(h)
        except Exception as e:  # the harness's own arguments could not be made
            v = f"its arguments could not be made: {type(e).__name__}"
        if isinstance(v, str):
            reason = re.sub(r"a \d+-device", "a multi-device", v)
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            made += 1
            declared += v.kind == "declared"
    return {"harnesses": len(harnesses), "variants": made, "declared": declared,
            "skipped": dict(sorted(skipped.items(), key=lambda kv: -kv[1]))}


class SymbolicCheck(Base):
    """``--shapes symbolic``: after the static path, or alone; a declared variant
    (``Harness.poly``) runs alone whether or not its static twin traces."""

    spec = check_spec("symbolic")

    def applies(self, run: Run) -> bool:
        shapes = run.opts.shapes
        return "symbolic" in shapes and (run.traced.ok or (run.h.poly is not None and "static" not in shapes))

    def run(self, run: Run) -> Produced:
        return run_symbolic(run.h, run.opts.platforms), []


CHECK = SymbolicCheck()
