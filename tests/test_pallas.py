"""The pallas catalog and its ``pallas_export`` stage (docs/pallas.md): each backend's custom
call, the TPU device-kind hazard, JAX's refusals as limitations, interpret-mode numerics
against the float64 reference, a planted fault seen only at the shapes it breaks, and the
command line's one-line errors."""
from __future__ import annotations

import dataclasses
import importlib

import pytest

from farm import catalog
from farm.catalog import Harness
from farm.catalog.pallas import generations, targets
from farm.errors import UnknownName
from farm.judge import pallas as judge
from farm.judge.limitations import judge_record
from farm.pipeline.pallas import run_pallas
from farm.results import Options, Record
from farm.stages.pallas import mosaic_gpu_switch


def _one(pattern: str) -> Harness:
    hs = catalog.select(catalog.Filters(catalog="pallas", name=(pattern,)))
    assert len(hs) == 1, [h.name for h in hs]
    return hs[0]


def _export(h: Harness, *only: str) -> dict[str, Record]:
    """The stage's records by target, judged by the stage's judge but not yet by limitations."""
    return {r.platform: r for r in run_pallas(h, h.make_args(), Options(pallas_targets=only))}


def test_the_tpu_generations_are_the_device_kinds_the_installed_jax_knows() -> None:
    from jax._src.pallas.mosaic import tpu_info

    gens = generations()
    assert {"tpu:v4", "tpu:v5e", "tpu:v5p", "tpu:v6e"} <= {t.label for t in gens}
    for t in gens:
        assert tpu_info.chip_version_from_device_kind(t.device_kind).value == t.generation
    add = _one("farm.add_grid_float32_16x256*")
    assert len(targets(add.pallas, ("cpu", "cuda", "rocm", "tpu"))) == len(gens) + 4  # every backend
    tpu_only = _one("tpu.matmul_float32_256x256*")
    assert {t.platform for t in targets(tpu_only.pallas, ("cuda", "rocm", "tpu"))} == {"tpu"}
    with pytest.raises(UnknownName, match="tpu:v9"):
        targets(add.pallas, ("tpu",), ("tpu:v9",))


def test_each_backend_lowers_to_its_own_custom_call_with_the_ops_inside_readable() -> None:
    """One kernel without compiler parameters: Mosaic TPU, Mosaic GPU and Triton each give
    their custom call; Triton's needs a safety check turned off, and the record says so;
    rocm with Mosaic GPU is JAX's refusal, expected by the harness's limitation."""
    h = _one("farm.add_grid_float32_16x256*")
    recs = _export(h, "tpu:v5e", "cuda", "rocm")
    assert set(recs) == {"tpu:v5e", "cuda:mosaic_gpu", "cuda:triton", "rocm:triton", "rocm:mosaic_gpu"}
    want = {"tpu:v5e": "tpu_custom_call", "cuda:mosaic_gpu": "mosaic_gpu_v2", "cuda:triton": "__gpu$xla.gpu.triton",
            "rocm:triton": "__gpu$xla.gpu.triton"}
    if not mosaic_gpu_switch():  # jax 0.12: pl.pallas_call is Triton's on GPUs
        for label in ("cuda:mosaic_gpu", "rocm:mosaic_gpu"):
            assert recs[label].status == "skipped" and "Triton only" in recs[label].error
            assert judge_record(h, recs[label]).status == "skipped"  # no limitation turns it into a verdict
        want.pop("cuda:mosaic_gpu")
    for label, call in want.items():
        r = recs[label]
        assert r.status == "ok", (label, r.error)
        assert r.facts["custom_calls"] == [call]
        (payload,) = r.facts["payloads"]
        assert payload["bytes"] > 0 and payload["ops"], payload  # the kernel's module read back
        assert any(op.endswith(".addf") for op in payload["ops"]), payload["ops"]
        assert all(r.facts["round_trip"].values())
        assert r.facts["disabled_checks"] == (["custom_call(__gpu$xla.gpu.triton)"] if "triton" in label else [])
    assert "tpu.vector_store" in recs["tpu:v5e"].facts["payloads"][0]["ops"]
    if mosaic_gpu_switch():
        refused = recs["rocm:mosaic_gpu"]
        assert refused.status == "error" and "does not yet support AMD ROCm" in refused.error
        assert judge_record(h, refused).status == "expected_fail"


def test_a_kernel_that_asks_for_the_chip_lowers_only_when_told_a_tpu_device_kind() -> None:
    """The hazard (docs/findings.md): ``jnp.sign`` makes Mosaic TPU read the default device's
    kind; on this CPU host that is "cpu". The stage tells it each generation instead."""
    import jax
    import numpy as np

    h = _one("farm.sign_float32_8x128*")
    x = np.ones((8, 128), np.float32)
    with pytest.raises(Exception, match="Unsupported TPU device kind: cpu"):
        jax.jit(h.pallas.build(False)).trace(x).lower(lowering_platforms=("tpu",))
    recs = _export(h, "tpu")
    assert len(recs) == len(generations()) and all(r.status == "ok" for r in recs.values())


def test_a_symbolic_grid_exports_for_tpu_and_is_refused_for_gpus() -> None:
    h = _one("farm.copy_symbolic*")
    recs = _export(h, "tpu:v6e", "cuda:triton", "cuda:mosaic_gpu")
    assert recs["tpu:v6e"].status == "ok" and recs["tpu:v6e"].facts["symbolic"] == ["8*w, 128*h"]
    for label in ("cuda:triton", *(("cuda:mosaic_gpu",) if mosaic_gpu_switch() else ())):
        assert "dynamic grid bounds not supported" in recs[label].error
        assert judge_record(h, recs[label]).status == "expected_fail"


def test_the_judge_fails_a_wrong_custom_call_and_a_changed_round_trip() -> None:
    ok = Record("pallas_export", "tpu:v5e", "ok", facts={
        "expected_call": "tpu_custom_call", "custom_calls": ["tpu_custom_call"],
        "round_trip": {"same_module": True, "same_platforms": True}})
    assert judge.pallas(ok).status == "ok"
    wrong = ok.with_status("ok", facts={**ok.facts, "custom_calls": []})
    assert judge.pallas(wrong).status == "fail" and "not tpu_custom_call" in judge.pallas(wrong).error
    changed = ok.with_status("ok", facts={**ok.facts, "round_trip": {"same_module": False}})
    assert "module changed" in judge.pallas(changed).error
    rocm = Record("pallas_export", "rocm:mosaic_gpu", "ok", facts={
        "platform": "rocm", "expected_call": "mosaic_gpu_v2", "custom_calls": ["mosaic_gpu_v2"], "round_trip": {}})
    assert "CUDA-only mosaic_gpu_v2" in judge.pallas(rocm).error  # JAX's refusal, bypassed (docs/findings.md)


def test_a_mosaic_gpu_kernel_of_the_wheel_exports_for_cuda_told_it_is_an_h100() -> None:
    """The Hopper matmul reads the SM count from the default device: the cuda target is told
    it is an H100 (132 SMs); its mosaic_gpu_v2 payload is read back to the ops inside."""
    h = _one("gpu.hopper_matmul_float16_512x256*")
    rec = _export(h, "cuda:mosaic_gpu")["cuda:mosaic_gpu"]
    assert rec.status == "ok", rec.error
    assert rec.facts["device_kind"] == "NVIDIA H100 80GB HBM3" and rec.facts["custom_calls"] == ["mosaic_gpu_v2"]
    assert any("wgmma" in op or "nvvm" in op for op in rec.facts["payloads"][0]["ops"])


def test_interpret_numerics_pass_and_a_planted_ragged_block_fault_fails_only_where_rows_are_ragged(monkeypatch) -> None:  # noqa: ANN001
    """softmax in interpret mode against the float64 reference: clean at every shape; with
    ``ragged_block:softmax`` planted, only the shapes whose rows leave an incomplete last block
    of 8 fail (13 rows, 3x5 rows), and the stage's own exports are untouched by numerics."""
    from farm.faults.planted import PALLAS_KERNELS, ragged_block
    from farm.pipeline import run_harness

    ragged, whole = _one("gpu.softmax_float32_13x100"), _one("gpu.softmax_float32_8x128")
    opts = Options(repeats=1, platforms=("cpu",), crossexec=False)

    def compare(h: Harness) -> str:  # a fresh function: jit's cache would keep the unplanted trace
        fresh = dataclasses.replace(h, fun=h.pallas.build(True))
        return next(r.status for r in run_harness(fresh, opts).records if r.stage == "compare")

    assert compare(ragged) == "ok" and compare(whole) == "ok"
    module = importlib.import_module(PALLAS_KERNELS["softmax"])
    monkeypatch.setattr(module, "softmax", module.softmax)  # undone after the test
    ragged_block("softmax")
    assert compare(ragged) == "fail" and compare(whole) == "ok"


def test_a_kernel_that_drops_the_remainder_of_its_grid_is_an_expected_compare_failure() -> None:
    """tpu matmul's grid is size // block: 200 rows in blocks of 128 leave 72 rows unwritten,
    declared as a limitation; at whole blocks it passes."""
    from farm.pipeline import run_harness

    opts = Options(repeats=1, platforms=("cpu",), crossexec=False)
    short = run_harness(_one("tpu.matmul_float32_200x256*"), opts)
    assert next(r.status for r in short.records if r.stage == "compare") == "expected_fail"
    bare = dataclasses.replace(_one("tpu.matmul_float32_200x256*"), limitations=())
    assert next(r.status for r in run_harness(bare, opts).records if r.stage == "compare") == "fail"


def test_unknown_kernel_target_or_empty_match_is_one_line_exit_2(tmp_path, capsys) -> None:  # noqa: ANN001
    from farm.cli import main

    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert main(["sweep", "--db", db, "--catalog", "pallas", "--primitive", "no_such_kernel"]) == 2
    assert "unknown primitive 'no_such_kernel'" in capsys.readouterr().err
    assert main(["sweep", "--db", db, "--catalog", "pallas", "--pallas-targets", "tpu:v99"]) == 2
    err = capsys.readouterr().err
    assert "unknown pallas target 'tpu:v99'" in err and len(err.strip().splitlines()) == 1
    assert main(["sweep", "--db", db, "--catalog", "pallas", "--pallas-targets", "cuda:cutlass"]) == 2
    assert main(["sweep", "--db", db, "--catalog", "pallas", "--match", "no_such_kernel"]) == 2


def test_the_matrix_puts_each_kernel_in_a_column_per_target_and_flags_generation_dependent_payloads() -> None:
    from farm.analysis.pallas import NUMERICS, matrix

    def row(harness, stage, platform, status, **facts):  # noqa: ANN001, ANN003, ANN202
        return {"harness": harness, "group": "farm", "primitive": "sign", "stage": stage, "platform": platform,
                "status": status, "error": None if status == "ok" else "boom", "facts": facts}

    rows = [row("sign_bf16", "pallas_export", "tpu:v3", "ok", custom_calls=["tpu_custom_call"],
                payloads=[{"sha256": "a"}]),
            row("sign_bf16", "pallas_export", "tpu:v4", "ok", custom_calls=["tpu_custom_call"],
                payloads=[{"sha256": "b"}]),
            row("sign_bf16", "pallas_export", "cuda:triton", "ok", custom_calls=["__gpu$xla.gpu.triton"]),
            row("sign_f32", "pallas_export", "rocm:mosaic_gpu", "expected_fail"),
            row("sign_f32", "compare", "cpu", "ok"), row("sign_f32", "compare", "tpu", "fail"),
            row("sign_f32", "lower", "cpu", "error")]
    m = matrix(rows)
    assert m["columns"] == [NUMERICS, "tpu:v3", "tpu:v4", "cuda:triton", "rocm:mosaic_gpu"]
    (k,) = m["kernels"]
    assert k["kernel"] == "farm.sign" and k["harnesses"] == 2 and k["generation_dependent"] == ["sign_bf16"]
    assert k["cells"][NUMERICS]["worst"] == "ok"  # the cpu's compare only
    assert k["cells"]["rocm:mosaic_gpu"] == {"worst": "expected_fail", "counts": {"expected_fail": 1}, "calls": [],
                                             "errors": ["boom"]}
    assert k["cells"]["cuda:triton"]["calls"] == ["__gpu$xla.gpu.triton"]


@pytest.mark.filterwarnings("ignore")
def test_the_dashboard_page_shows_the_matrix_as_html_and_json(sqlite_url: str, tmp_path) -> None:  # noqa: ANN001
    from dashboards.app import create_app
    from farm.host import describe
    from farm.pipeline import run_harness
    from farm.run import bundles as bundle
    from farm.store import open_store

    hs = [_one("farm.sign_bfloat16*"), _one("farm.copy_symbolic*")]
    opts = Options(platforms=("cpu", "cuda", "rocm", "tpu"), pallas_targets=("tpu:v3", "tpu:v4", "cuda", "rocm"),
                   repeats=1, crossexec=False)
    path = str(tmp_path / "p.json.gz")
    bundle.write(path, environment=describe(), run={"name": "p", "catalog": "pallas", "platforms": list(opts.platforms),
                                                    "run_on": ["cpu"]},
                 harnesses=[h.describe() for h in hs], outcomes=[run_harness(h, opts) for h in hs])
    bundle.import_bundle(open_store(sqlite_url), path, name="pallas-run")
    client = create_app(sqlite_url).test_client()
    got = client.get("/pallas.json").get_json()
    assert got["columns"][:3] == ["interpret (cpu)", "tpu:v3", "tpu:v4"]
    by = {k["kernel"]: k for k in got["kernels"]}
    assert by["farm.sign"]["generation_dependent"] == [hs[0].name]
    assert by["farm.copy_symbolic"]["cells"]["cuda:triton"]["worst"] == "expected_fail"
    assert by["farm.sign"]["cells"]["tpu:v4"]["calls"] == ["tpu_custom_call"]
    html = client.get("/pallas").get_data(as_text=True)
    assert "farm.copy_symbolic" in html and "payload differs by TPU generation" in html


def test_a_kernel_is_also_held_to_the_jnp_reference_it_ships() -> None:
    """``pallas_reference``: the interpret-mode kernel against the wheel's own jnp reference
    (rms_norm_reference), under twice the harness's tolerance; the tpu paged_attention kernel,
    which rounds float32 K/V to bfloat16, misses the gpu kernel's reference as it misses ours."""
    norm = _one("gpu.rms_norm_float32_3x5x100*")
    (rec,) = _export(norm, "tpu:v5e")  # a Triton kernel: no tpu target, the reference check alone
    rec = _export(norm, "tpu:v5e")[rec]
    assert rec.stage == "pallas_reference" and rec.status == "ok", rec.error
    assert rec.facts["reference"] == "rms_norm_reference" and rec.facts["rtol"] == 2 * norm.tol[0]
    paged = _one("tpu.paged_attention_float32_3x4*")
    got = [r for r in run_pallas(paged, paged.make_args(), Options(pallas_targets=("cuda",)))
           if r.stage == "pallas_reference"]
    assert got[0].status == "fail" and judge_record(paged, got[0]).status == "expected_fail"


def test_a_half_precision_kernel_is_held_to_its_reference_on_float32_inputs() -> None:
    """The wheel's mha_reference run in bfloat16 is itself 0.11 off its float32 result on a
    causal 256 x 128 attention; jax 0.9.2's sweep flagged that rounding as the kernel's. The
    reference now gets float32 copies of half-precision inputs: the kernel passes, and it is
    still held to the same tolerance (a float32 kernel's reference gets its inputs as they are)."""
    import numpy as np

    from farm.stages.pallas import run_reference

    flash = _one("tpu.flash_attention_bfloat16_1x2x256x128_*causal=True*")
    dyn = flash.make_args()
    rec = run_reference(flash, dyn)
    assert rec.status == "ok" and rec.facts["reference_inputs"] == "float32", rec.error
    got, want = rec.handle
    assert str(got[0].dtype) == "bfloat16" and want[0].dtype == np.float32
    wide = [np.asarray(a, np.float32) for a in dyn]
    assert np.array_equal(np.asarray(flash.pallas.reference(*wide)), want[0])  # the reference, on float32 copies
    rms = run_reference(_one("gpu.rms_norm_float32_3x5x100*"), _one("gpu.rms_norm_float32_3x5x100*").make_args())
    assert "reference_inputs" not in rms.facts
