"""The compositions check (``--compositions [representative|all]``): a harness's deserialized
export called as users call it, inside larger programs (``farm.stages.compositions``), each
result judged against the artifact's own call (``farm.judge.compositions``).

``representative`` (what ``--compositions`` alone means) takes every harness of the
export-feature and sharding families, whose point is how an artifact is used, and one harness
per primitive of every other family (the one with the smallest fingerprint among its catalog's
harnesses of that primitive: the same on every run and host); ``all`` takes every harness.
"""
from __future__ import annotations

import functools
from typing import Any

from farm.catalog import Harness, registry
from farm.judge import verdict
from farm.pipeline.check import Base, Produced, Run
from farm.results import Record, check_spec
from farm.stages import compositions
from farm.stages.record import failure

#: Families whose every harness is composed: how an artifact is used is what they are about.
EVERY_HARNESS = ("export_features", "sharding")


def composed(h: Harness, how: str) -> bool:
    """Whether ``--compositions how`` composes ``h``."""
    if how == "all":
        return True
    if how != "representative":
        return False
    return h.family in EVERY_HARNESS or registry.representative(h)


class CompositionsCheck(Base):
    """On the static path of a harness whose artifact made its round trip, on a host that runs it."""

    spec = check_spec("compositions")

    def applies(self, run: Run) -> bool:
        return (run.opts.compositions != "off" and run.static and not run.abstract and run.serialized is not None
                and "cpu" in run.opts.platforms and composed(run.h, run.opts.compositions))

    def run(self, run: Run) -> Produced:
        here = tuple(getattr(run.exported, "platforms", ()) or ())
        if "cpu" not in here:  # a kernel exported for cuda alone (Mosaic GPU): this host cannot call it
            return [Record("composition", c, "not_runnable_here", error_type="NoCpuPart",
                           error=f"the artifact was exported for {', '.join(here)}: it has no cpu part to call here",
                           facts={"platforms": list(here)}) for c in compositions.COMPOSITIONS], []
        if run.h.devices > 1 and not run.h.mesh:  # a pmap over the host's devices: no mesh to call it on here
            return [Record("composition", c, "skipped", error=f"an artifact over {run.h.devices} devices without a "
                           "mesh: the farm has no sharding to call it with", facts={"reason": "devices without mesh"})
                    for c in compositions.COMPOSITIONS], []
        return self._composed(run)

    def _composed(self, run: Run) -> Produced:
        from jax import export

        h, dyn = run.h, run.dyn
        try:
            back = export.deserialize(bytearray(run.serialized.handle.blob))
            plain = compositions.own_call(back, dyn, h)
        except Exception as e:  # its own call (a sharded one's: inside jit with its shardings) raised: said, and nothing to compose
            own = verdict(compositions.raised("call", e, 0.0), h=h)
            return [own, *(Record("composition", c, "skipped", error="the artifact's own call raised",
                                  facts={"reason": "own call raised"}) for c in compositions.COMPOSITIONS)], []

        @functools.cache
        def with_vjp() -> Any:  # the artifact serialized with its vjp, for grad
            return export.deserialize(bytearray(run.exported.serialize(vjp_order=1)))

        out = []
        together = {r.platform: r for r in compositions.control_flow(back, dyn, plain, h) or ()}
        for c in compositions.COMPOSITIONS:
            try:
                rec = together.get(c) or compositions.run(c, back, dyn, plain, h, run.traced.handle.jitted, with_vjp)
                out.append(verdict(rec, h=h))
            except Exception as e:  # the farm's own bug: an error record, never a pass
                out.append(failure(Record, "composition", c, e, 0.0))
        if h.feature is not None and h.feature.kind == "prng_key" and len(dyn) == 1:  # typed keys of each impl
            try:
                out += [verdict(rec, h=h) for rec in compositions.typed_keys(dyn[0])]
            except Exception as e:  # the farm's own bug: an error record, never a pass
                out.append(failure(Record, "composition", "keys", e, 0.0))
        return out, []


CHECK = CompositionsCheck()
