"""The Pallas API surface, one kernel per feature (``harnesses/pallas_features.py``, family
``pallas_features``): every feature the catalog names has a kernel, each kernel lowers for its
backends' targets and runs in interpret mode, a compiler parameter that never reaches the custom
call's configuration fails, and the refusals found are limitations whose repro scripts exist."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from farm import catalog
from farm.catalog import Harness
from farm.judge.pallas import declared_config
from farm.pipeline import run_harness
from farm.results import BAD, Options

ROOT = Path(__file__).resolve().parents[1]
#: The features of issue 53's list that have a kernel here.
FEATURES = {"program_id", "named_grid", "vmap", "aliases", "cost_estimate", "metadata", "fori_loop", "when",
            "async_copy", "scratch_shapes", "prng_key", "tpu_params", "triton_params", "atomic_add",
            "dynamic_export"}
#: One TPU generation, both Triton targets and Mosaic GPU: the 11 generations agree on every kernel
#: (docs/pallas.md).
TARGETS = ("tpu:v5e", "cuda:triton", "rocm:triton", "cuda:mosaic_gpu")


@pytest.fixture(scope="module")
def features() -> list[Harness]:
    return catalog.select(catalog.Filters(catalog="pallas", family=("pallas_features",)))


@pytest.fixture(scope="module")
def swept(features) -> dict[str, list]:  # noqa: ANN001
    opts = Options(pallas_targets=TARGETS)
    return {h.name: run_harness(h, opts).records for h in features}


def _one(features: list[Harness], primitive: str, **params: str) -> Harness:
    (h,) = [h for h in features if h.primitive == primitive and params.items() <= dict(h.key.params).items()]
    return h


def test_every_feature_has_a_kernel_and_every_compiler_parameter_a_harness(features) -> None:  # noqa: ANN001
    from jax.experimental.pallas import tpu as pltpu

    from harnesses import pallas_features as module

    assert {h.primitive for h in features} == FEATURES
    assert all(h.catalog == "pallas" and h.pallas is not None for h in features)
    fields = {f.name for f in dataclasses.fields(pltpu.CompilerParams)}
    assert set(module.TPU_PARAMS) <= fields
    # a field this jax adds shows up here: it gets a harness or a reason in the module
    assert fields - set(module.TPU_PARAMS) <= set(module.TPU_PARAMS_LEFT_OUT), fields - set(module.TPU_PARAMS)
    tpu = {dict(h.key.params)["field"] for h in features if h.primitive == "tpu_params"}
    assert tpu == set(module.TPU_PARAMS)
    assert all(h.pallas.config or h.limitations for h in features if h.primitive == "tpu_params")


def test_the_family_is_clean_and_every_refusal_is_a_limitation_with_a_repro(features, swept) -> None:  # noqa: ANN001
    bad = {(n, r.stage, r.platform, r.status, (r.error or "")[:120]) for n, recs in swept.items() for r in recs
           if r.status in BAD}
    assert not bad, sorted(bad)
    exports = [r for recs in swept.values() for r in recs if r.stage == "pallas_export"]
    assert {r.platform for r in exports} == set(TARGETS)
    assert sum(r.status == "ok" for r in exports) >= 40
    matched = {r.facts.get("limitation") for recs in swept.values() for r in recs if r.status == "expected_fail"}
    for h in features:
        for lim in h.limitations:
            if lim.description.startswith("finding:"):
                repro = lim.description.split("docs/repros/")[1].split(")")[0].split(";")[0]
                assert (ROOT / "docs" / "repros" / repro).exists(), repro
    findings = {lim.description for h in features for lim in h.limitations if lim.description.startswith("finding:")}
    assert findings - {"finding: jax.vmap of a named-grid kernel no longer lowers for Triton (IndexError in "
                       "_program_id_lowering_rule; docs/repros/pallas_triton_vmap_named_grid.py)"} <= matched
    # the compiler parameters reached the configuration: every tpu_params export is ok and holds its field
    # (jax 0.9.2 lacks needs_layout_passes: skipped there, with the reason)
    for h in features:
        if h.primitive == "tpu_params" and h.pallas.config:
            (rec,) = [r for r in swept[h.name] if r.stage == "pallas_export"]
            assert rec.status == "ok", (h.name, rec.error)


def test_the_configuration_is_read_from_each_backends_custom_call(swept) -> None:  # noqa: ANN001
    recs = {r.platform: r for r in swept["features.metadata_float32_16x256"] if r.stage == "pallas_export"}
    tpu = recs["tpu:v5e"].facts["payloads"][0]["config"]
    assert tpu["kernel_name"] == "farm_metadata_kernel" and tpu["kernel_metadata"] == {"farm_feature": "metadata"}
    triton = recs["cuda:triton"].facts["payloads"][0]["config"]
    assert triton["name"] == "farm_metadata_kernel" and triton["metadata"] == {"farm_feature": "metadata"}
    assert "ir" not in triton and "body" not in tpu.get("custom_call_config", {})  # the kernel itself is not config
    sem = [r for r in swept["features.tpu_params_float32_16x256_16x256_field=dimension_semantics"]
           if r.stage == "pallas_export"][0].facts["payloads"][0]["config"]
    assert sem["body"]["dimension_semantics"] == ["#tpu.dimension_semantics<parallel>",
                                                  "#tpu.dimension_semantics<arbitrary>"]


def test_a_parameter_that_never_reaches_the_backend_fails(features) -> None:  # noqa: ANN001
    """The real artifact, with the kernel's declared configuration changed: what JAX wrote no longer
    holds what is asked for, and the export is a ``fail`` naming the path."""
    h = _one(features, "tpu_params", field="internal_scratch_in_bytes")
    path = "mosaic_tpu:custom_call_config.internal_scratch_in_bytes"
    assert h.pallas.config == {path: 2**16}
    opts = Options(pallas_targets=("tpu:v5e",))

    def export(config: dict) -> object:
        kernel = dataclasses.replace(h.pallas, config=config)
        (rec,) = [r for r in run_harness(dataclasses.replace(h, pallas=kernel), opts).records
                  if r.stage == "pallas_export"]
        return rec

    assert export(dict(h.pallas.config)).status == "ok"
    wrong = export({path: 2**17})
    assert wrong.status == "fail" and "asked for custom_call_config.internal_scratch_in_bytes = 131072" in wrong.error
    absent = export({"mosaic_tpu:custom_call_config.no_such_field": True})
    assert absent.status == "fail" and "has no custom_call_config.no_such_field" in absent.error
    # another backend's expectations do not apply to a TPU target
    assert export({"triton:num_warps": 2}).status == "ok"


def test_declared_configuration_rules() -> None:
    config = {"custom_call_config": {"cost_estimate": {"flops": 1, "remote_bytes_transferred": 0}, "x": [True]},
              "has_side_effect": True}
    assert declared_config({"mosaic_tpu:custom_call_config.x": [True], "mosaic_tpu:has_side_effect": True},
                           "mosaic_tpu", config) == []
    assert declared_config({"mosaic_tpu:custom_call_config.cost_estimate": {"flops": 1}}, "mosaic_tpu", config) == []
    assert declared_config({"mosaic_tpu:custom_call_config.cost_estimate": {"flops": 2}}, "mosaic_tpu", config)
    assert declared_config({"mosaic_tpu:custom_call_config.absent": None}, "mosaic_tpu", config) == []
    assert declared_config({"mosaic_tpu:has_side_effect": None}, "mosaic_tpu", config)  # present where absence was asked
    assert declared_config({"triton:num_warps": 4}, "mosaic_tpu", config) == []
    assert declared_config({"triton:num_warps": 4}, "triton", {"num_warps": 2})


def test_a_dynamic_shape_export_is_what_lets_a_symbolic_block_through(features) -> None:  # noqa: ANN001
    h = _one(features, "dynamic_export", dims="r,c")
    opts = Options(pallas_targets=("tpu:v5e",))
    (dyn,) = [r for r in run_harness(h, opts).records if r.stage == "pallas_export"]
    assert dyn.status == "ok" and dyn.facts["symbolic"] == ["r, c"]
    plain = dataclasses.replace(h, pallas=dataclasses.replace(h.pallas, dynamic_shapes=False))
    (rec,) = [r for r in run_harness(plain, opts).records if r.stage == "pallas_export"]
    assert rec.status == "error" and "dynamically-shaped blocks" in rec.error


def test_mosaic_gpu_targets_export_the_plgpu_kernel_twins(features, swept) -> None:  # noqa: ANN001
    """Where ``pl.pallas_call`` has no Mosaic GPU lowering (jax 0.12), a feature's Mosaic GPU target is
    its ``plgpu.kernel`` twin (grid names, pipelines, the batch of a vmap), judged as every export is;
    a feature without one is ``skipped`` with the reason. The twins' configuration is read too: the
    cost estimate reaches Mosaic GPU's backend config, the kernel's name its entry function."""
    from farm.stages.pallas import mosaic_gpu_switch

    if mosaic_gpu_switch():
        pytest.skip("this jax lowers pl.pallas_call with Mosaic GPU: no twin is exported")
    mgpu = {n: r for n, recs in swept.items() for r in recs if r.stage == "pallas_export"
            and r.platform == "cuda:mosaic_gpu"}
    twins = {h.name for h in features if h.pallas.mosaic_gpu is not None}
    assert {"program_id", "named_grid", "vmap", "cost_estimate", "metadata", "fori_loop", "when"} == {
        h.primitive for h in features if h.name in twins}
    assert all(mgpu[n].facts.get("written_with") == "plgpu.kernel" for n in twins)
    assert all(mgpu[n].status in ("ok", "expected_fail") for n in twins)
    assert sum(mgpu[n].status == "ok" for n in twins) >= 8
    assert {mgpu[n].status for n in set(mgpu) - twins} == {"skipped"}
    cost = mgpu["features.cost_estimate_float32_16x256"].facts["payloads"][0]["config"]
    assert cost["cost_estimate"]["flops"] == 4096
    entry = mgpu["features.metadata_float32_16x256"].facts["payloads"][0]["config"]["body"]["entry"]
    assert entry == "farm_metadata_kernel_mosaic_gpu"
    # a twin's name that does not reach the entry function fails, as a TPU parameter does
    h = _one(features, "metadata")
    kernel = dataclasses.replace(h.pallas, config={"mosaic_gpu:body.entry": "another_kernel_mosaic_gpu"})
    (rec,) = [r for r in run_harness(dataclasses.replace(h, pallas=kernel),
                                     Options(pallas_targets=("cuda:mosaic_gpu",))).records if r.stage == "pallas_export"]
    assert rec.status == "fail" and "body.entry" in rec.error
