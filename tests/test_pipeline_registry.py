"""The check interface (``farm.pipeline.check``, ``farm.pipeline.registry``): a new check is one
module, its ``Check`` and its ``CheckSpec``, and one registry line. Here a test registers one, a
real check (the harness exported twice in one process must give the same bytes), and every
generic part of the farm picks it up: the pipeline runs it, its stage is a stage, a
``Limitation`` may name it, the judge applies that limitation, the result cache never reuses
its records; and the built-in checks are what the stage lists are made of."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from jax import lax

from farm import catalog
from farm import results
from farm.pipeline import registry, run_harness
from farm.pipeline.check import Base, Produced, Run
from farm.results import CheckSpec, Options, Record, Reuse


class ExportTwice(Base):
    """The multi-platform export made twice in one process: the bytes must be the same."""

    spec = CheckSpec("export_twice", ("export_twice",))

    def __init__(self, tamper: bool = False) -> None:
        self.tamper = tamper  # plant a process-state leak: the second export differs

    def applies(self, run: Run) -> bool:
        return run.static

    def run(self, run: Run) -> Produced:
        from jax import export

        blobs = [bytes(export.export(run.traced.handle.jitted, platforms=run.opts.platforms)(*run.dyn).serialize())
                 for _ in range(2)]
        if self.tamper:
            blobs[1] += b"\0"
        same = blobs[0] == blobs[1]
        return [Record("export_twice", "export", "ok" if same else "fail", error_type=None if same else "Differs",
                       error=None if same else "two exports in one process differ", facts={"bytes": len(blobs[0])})], []


def _harness(*limitations: catalog.Limitation) -> catalog.Harness:
    return catalog.define("test_only", "sin", lax.sin, [catalog.RandArg((8,), "float32")], dtype="float32",
                          catalog="test_only", reference=np.sin, limitations=list(limitations))


OPTS = Options(platforms=("cpu", "tpu"), repeats=1)


def test_a_registered_check_runs_in_the_pipeline_after_the_upstream_checks_and_before_the_native_one() -> None:
    with registry.registered(ExportTwice()):
        assert "export_twice" in results.stages() and "export_twice" in results.upstream_stages()
        out = run_harness(_harness(), OPTS)
    stages = [r.stage for r in out.records]
    rec = next(r for r in out.records if r.stage == "export_twice")
    assert rec.status == "ok" and rec.facts["bytes"] > 0
    assert stages.index("serialize") < stages.index("export_twice") < stages.index("compile")
    # and gone with the block: no stage, no record, a Limitation may not name it
    assert "export_twice" not in results.stages()
    assert all(r.stage != "export_twice" for r in run_harness(_harness(), OPTS).records)
    with pytest.raises(ValueError, match="Limitation stage"):
        catalog.Limitation("x", stage="export_twice")


def test_its_failure_is_a_fail_and_a_limitation_naming_its_stage_makes_it_expected_and_flags_a_stale_one() -> None:
    with registry.registered(ExportTwice(tamper=True)):
        bad = next(r for r in run_harness(_harness(), OPTS).records if r.stage == "export_twice")
        known = catalog.Limitation("exports differ here", stage="export_twice", status="fail", error="differ")
        judged = next(r for r in run_harness(_harness(known), OPTS).records if r.stage == "export_twice")
    assert bad.status == "fail"
    assert judged.status == "expected_fail" and judged.facts["limitation"] == "exports differ here"
    with registry.registered(ExportTwice(tamper=False)):
        stale = next(r for r in run_harness(_harness(known), OPTS).records if r.stage == "export_twice")
    assert stale.status == "unexpected_pass"


def test_an_upstream_check_runs_again_when_the_native_records_are_reused() -> None:
    h = _harness()
    first = run_harness(h, OPTS)
    reuse = Reuse(first.downstream_key, 7, tuple(r.to_dict() for r in first.records))
    with registry.registered(ExportTwice(tamper=True)):
        again = run_harness(h, OPTS, reuse=reuse)
    by = {(r.stage, r.platform): r for r in again.records}
    assert by[("compare", "cpu")].facts["reused_from"] == 7  # the reusable check's records came from run 7
    assert by[("export_twice", "export")].status == "fail" and "reused_from" not in by[("export_twice", "export")].facts


def test_a_check_cannot_take_a_stage_or_name_another_check_has() -> None:
    with pytest.raises(ValueError, match="belong to another check"):
        registry.register(_with_spec(CheckSpec("mine", ("compare",))))
    with pytest.raises(ValueError, match="exists"):
        registry.register(_with_spec(CheckSpec("native", ("whatever",))))
    assert "mine" not in {c.name for c in results.check_specs()}


def _with_spec(spec: CheckSpec) -> ExportTwice:
    check = ExportTwice()
    check.spec = spec
    return check


def test_the_stage_lists_the_options_and_the_fingerprint_are_derived_from_the_checks() -> None:
    specs = results.check_specs()
    # every stage belongs to exactly one check, and every check of the registry has its spec there
    every = [s for c in specs for s in c.stages]
    assert len(every) == len(set(every)) and set(every) == set(results.STAGES)
    assert {c.spec.name for c in registry.CHECKS} == {c.name for c in specs}
    assert set(results.UPSTREAM_STAGES) == {s for c in specs if not c.reusable for s in c.stages}
    # a check's option at its default is left out of the options (and the key) of a run ...
    assert "vjp" not in Options().to_dict() and "vjp" not in Options().key_fields()
    assert Options(vjp=2).to_dict()["vjp"] == 2
    # ... unless it was keyed from the start
    assert "shapes" in Options().key_fields() and "shapes" not in Options().to_dict()
    # each check's part of a harness enters its fingerprint, its code included
    h = next(h for h in catalog.load() if h.poly is not None and h.poly.maker is not None)
    other = dataclasses.replace(h.poly, maker=lambda point, rng: [])
    assert dataclasses.replace(h, poly=other).fingerprint != h.fingerprint
    assert dataclasses.replace(h, poly=None).fingerprint != h.fingerprint


def test_a_gated_check_is_asked_only_about_harnesses_that_set_its_field() -> None:
    asked: list[str] = []

    class OnEffects(ExportTwice):
        spec = CheckSpec("on_effects", ("on_effects",), harness_field="effects")

        def applies(self, run: Run) -> bool:
            asked.append(run.h.name)
            return False

    with_effects = next(h for h in catalog.load() if h.effects is not None)
    with registry.registered(OnEffects()):
        run_harness(_harness(), OPTS)
        assert asked == []
        run_harness(with_effects, Options(platforms=("cpu",), repeats=1))
    assert asked == [with_effects.name]
