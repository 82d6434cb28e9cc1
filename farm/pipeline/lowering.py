"""The lowering check: each platform's lowering and the census of its module (and, for a
sharded harness, its structural check), the multi-platform export of the platforms that
lowered, its serialize round trip and the census of the artifact. It leaves the lowered
modules, the artifact and the downstream key on the ``Run`` for the checks after it.

Its ``trace`` record is the pipeline's own (``farm.pipeline.harness``): every check needs the
traced harness, and one that does not (``pallas_xver``) runs where tracing failed.
"""
from __future__ import annotations

from typing import Any

from farm.cache import key as digest
from farm.catalog import Harness
from farm.judge import verdict
from farm.pipeline import meshes
from farm.pipeline.check import Base, Produced, Run
from farm.results import Artifact, Record, check_spec
from farm.stages import census, export, lower, sharding, trace


class LoweringCheck(Base):
    """Lower, census, sharding, export and serialize: the static path's upstream stages."""

    spec = check_spec("lowering")

    def applies(self, run: Run) -> bool:
        return run.static

    def run(self, run: Run) -> Produced:
        tr, h, opts = run.traced, run.h, run.opts
        run.lowered, lower_recs, module_arts = _lower(tr, opts.platforms, opts.keep_modules, h)
        run.serialized, run.exported, export_recs, export_arts = _export(
            tr, tuple(p for p in opts.platforms if run.lowered[p].ok), h)
        if not run.abstract:
            run.downstream_key = _downstream_key(h, run.options_digest, run.args, run.lowered,
                                                 run.serialized if opts.roundtrip else None)
        return [*lower_recs, *export_recs], [*module_arts, *export_arts]


CHECK = LoweringCheck()


def without_handle(rec: Record) -> Record:
    """A record as it is kept: without the live JAX objects it carried to the next stage."""
    return rec.with_status(rec.status, handle=None)


def _sharding(h: Harness, module: Any, platform: str, tr: trace.Traced) -> Record:
    """The structural check of a sharded module against the harness's mesh."""
    hlo = meshes.hlo_specs(h, tr.handle.dyn)
    return verdict(sharding.run(module, platform, h.mesh, h.collective_axes, h.in_specs, hlo,
                        partitioner=h.partitioner or "default",
                        constraints=tuple(zip(h.constraints, meshes.hlo_constraints(h)))))


def _lower(tr: trace.Traced, platforms: tuple[str, ...], keep_modules: bool, h: Harness
           ) -> tuple[dict[str, lower.Lowered], list[Record], list[Artifact]]:
    """(lowered per platform, records, module artifacts): each platform's lowering and the
    census of its module (and, for a sharded harness, its structural check), whose text is
    kept as an artifact unless told not to."""
    lowered: dict[str, lower.Lowered] = {}
    recs: list[Record] = []
    arts: list[Artifact] = []
    for p in platforms:
        lo = lower.run(tr, p)
        lowered[p] = lo
        recs.append(without_handle(lo))
        if lo.ok:
            recs.append(verdict(census.run(lo.handle.module, p)))
            if h.mesh:
                recs.append(_sharding(h, lo.handle.module, p, tr))
            if keep_modules:
                arts.append(Artifact(lo.module_sha256, "module", lo.handle.text.encode(),
                                     {"platform": p, "stage": "lower"}))
    return lowered, recs, arts


def _export(tr: trace.Traced, platforms: tuple[str, ...], h: Harness
            ) -> tuple[export.Serialized | None, Any, list[Record], list[Artifact]]:
    """(the serialized artifact if its round trip held, the live ``jax.export.Exported`` if the
    export succeeded, records, its artifact): the multi-platform export of the platforms that
    lowered, the serialize round trip, and the census of the artifact."""
    if not platforms:
        return None, None, [], []
    ex, *refused = export.run_all(tr, platforms)
    se = verdict(export.serialize(ex))
    recs = [without_handle(r) for r in (ex, *refused, se)]
    exported = ex.handle.exported if ex.ok and ex.handle is not None else None
    if se.handle is None:  # no artifact (a "differs" round trip still has one: checked below too)
        return None, exported, recs, []
    art = Artifact(se.artifact, "export", se.handle.blob, {
        "platforms": ex.facts["platforms"], "calling_convention_version": ex.facts["calling_convention_version"],
        "jax_version": jax_version(), "format": "jax.export.serialize"})
    # walk the artifact's own bytecode: printing it to text and parsing that back cost ~18 ms
    module = census.parse_artifact(bytes(ex.handle.exported.mlir_module_serialized))
    recs.append(verdict(census.run(module, "export"), exported=True))
    if h.mesh:
        recs.append(_sharding(h, module, "export", tr))
    return se, exported, recs, [art]


def _downstream_key(h: Harness, options_digest: str, args: list[Any], lowered: dict[str, lower.Lowered],
                    serialized: export.Serialized | None) -> str:
    """``serialized``: the export artifact where a downstream stage runs it (the round
    trip), else None. Only the round trip does: the multi-platform artifact differs between
    x64 on and off (its platform index is i32 or i64) where every module is the same."""
    modules = {p: lo.module_sha256 if lo.ok else f"{lo.status}:{lo.error_type}:{lo.error}"
               for p, lo in lowered.items()}
    modules["export"] = serialized.artifact if serialized is not None else "not run downstream"
    return digest.downstream_key(h, options_digest, modules, digest.inputs_digest(args))


def jax_version() -> str:
    import jax

    return jax.__version__
