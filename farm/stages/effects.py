"""effects_export: a harness with side effects (``Harness.effects``) exported in one
configuration of platforms, and every artifact JAX lets the CPU run, run with its effects
captured.

An export can go wrong in ways its outputs do not show: a debug print dropped, ordered
callbacks reordered, ``lax.platform_dependent`` taking another platform's branch. So each
run records what ``jax.debug.print`` wrote to stdout, what each callback received (in call
order) and the outputs:

- ``exported``: the artifact called here, where the configuration includes the cpu;
- ``relabelled`` (one platform) or ``as <p>`` (several): the artifact relabelled so the CPU
  runs platform ``p``'s part, as ``farm.stages.symbolic`` runs another platform's module (a
  one-platform artifact says ``("cpu",)``; in a multi-platform one the cpu and ``p`` swap
  places, so the platform index the CPU passes selects ``p``'s branch);
- ``deserialized ...``: the same after the serialize round trip.

And once per harness, ``native`` (``run_native``): the function under ``jax.jit`` on this
host's default device, not exported: what the effects are where nothing is exported,
checked against the harness's declaration like every artifact (so a wrong declaration, or
a capture that sees nothing, shows even where JAX exports none of them).

Whether what ran is right is the judge's (``farm.judge.effects``); this records what ran.
"""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.catalog.effects import label
from farm.platforms import platform_of
from farm.results import Record
from farm.stages.lower import NO_BACKEND
from farm.stages.parts import relabelled
from farm.stages.record import Timer, failure



@dataclass(frozen=True, slots=True)
class EffectsExported(Record):
    """stage ``effects_export``, ``platform`` the configuration's label ("cpu+cuda").
    facts: ``platforms``; ``observed``: {artifact run: {"branch", "printed", "calls",
    "outputs"}}; ``failed_at``: the step that raised (export, call, serialize)."""


def run_native(h: Harness, dyn: list[Any]) -> EffectsExported:
    """``h`` under ``jax.jit`` on this host's default device, its effects captured
    (platform ``native``; its ``branch``: this device's lowering platform)."""
    import jax

    assert h.effects is not None, "an effects harness declares Harness.effects"
    log: list[tuple[str, list[float]]] = []
    fun = jax.jit(h.effects.build(lambda tag, v: log.append((tag, _flat(v)))))
    d = jax.devices()[0]
    branch = platform_of(d.platform, d.client.platform, d.client.platform_version)
    timer = Timer()
    try:
        with timer():
            seen = _observe(fun, dyn, log)
        return EffectsExported("effects_export", "native", "ok", timer.seconds,
                               facts={"platforms": [branch], "observed": {"native": seen | {"branch": branch}}})
    except Exception as e:
        return failure(EffectsExported, "effects_export", "native", e, timer.seconds, facts={"platforms": [branch]})


def run(h: Harness, dyn: list[Any], platforms: tuple[str, ...]) -> EffectsExported:
    """Export ``h`` for ``platforms`` and run every artifact the CPU can, capturing effects."""
    import jax
    from jax import export

    assert h.effects is not None, "an effects harness declares Harness.effects"
    log: list[tuple[str, list[float]]] = []
    fun = h.effects.build(lambda tag, v: log.append((tag, _flat(v))))
    facts: dict[str, Any] = {"platforms": list(platforms)}
    observed: dict[str, dict[str, Any]] = {}
    timer = Timer()
    step = "export"
    try:
        with timer():
            exp = export.export(jax.jit(fun), platforms=platforms)(*dyn)
            facts["calling_convention_version"] = exp.calling_convention_version  # tokens differ by version
            step = "call"
            for name, art, branch in _runnable(exp, ""):
                observed[name] = _observe(art.call, dyn, log) | {"branch": branch}
            step = "serialize"
            back = export.deserialize(exp.serialize())
            step = "call"
            for name, art, branch in _runnable(back, "deserialized "):
                observed[name] = _observe(art.call, dyn, log) | {"branch": branch}
        return EffectsExported("effects_export", label(platforms), "ok", timer.seconds,
                               facts={**facts, "observed": observed})
    except Exception as e:
        rec = failure(EffectsExported, "effects_export", label(platforms), e, timer.seconds,
                      facts={**facts, "failed_at": step, "observed": observed})
        return rec.with_status("not_runnable_here") if NO_BACKEND.search(str(e)) else rec


def _runnable(exp: Any, prefix: str) -> list[tuple[str, Any, str]]:
    """(name, artifact the CPU runs, the platform whose part it runs) for each way to run
    ``exp`` here: as it is where it has a cpu part, and each other platform's part relabelled."""
    platforms = tuple(exp.platforms)
    out = [(f"{prefix}exported", exp, "cpu")] if "cpu" in platforms else []
    for p in platforms:
        if p == "cpu":
            continue
        if len(platforms) == 1:
            out.append((f"{prefix}relabelled", relabelled(exp, p), p))
        elif "cpu" in platforms:
            out.append((f"{prefix}as {p}", relabelled(exp, p), p))
    return out


def _observe(fun: Any, dyn: list[Any], log: list[tuple[str, list[float]]]) -> dict[str, Any]:
    """One call (of an ``Exported``'s ``call`` or a jitted function): the lines printed, the callbacks' (tag, values) in call order,
    and the outputs, each flattened."""
    import jax

    log.clear()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        res = fun(*dyn)
        jax.block_until_ready(res)
        jax.effects_barrier()  # unordered effects may still be running
    return {"printed": out.getvalue().splitlines(), "calls": [[tag, vals] for tag, vals in log],
            "outputs": [_flat(o) for o in jax.tree.leaves(res)]}


def _flat(v: Any) -> list[float]:
    return [float(x) for x in np.ravel(np.asarray(v))]
