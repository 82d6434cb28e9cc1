"""A Pallas kernel's per-target artifacts across jax versions (issue 44, docs/pallas.md): kept
by ``pallas_export``, carried in a version sweep's cross jobs (``Prior.pallas``) and
deserialized by the other jax (``pallas_xver``, deserialize only). The same code path with
A = B = the installed jax, an artifact whose payload was edited (the judge flags it), one that
does not deserialize, and, where the jax 0.9.2 venv is cached, the real other version."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from farm import catalog
from farm.catalog import Harness
from farm.pipeline.harness import run_harness
from farm.pipeline.pallas import run_pallas_kept, run_pallas_prior
from farm.results import Options
from farm.stages.pallas import mosaic_gpu_switch
from farm.stages.xhost import Prior

ROOT = Path(__file__).resolve().parents[1]
#: cuda:mosaic_gpu where this jax lowers such a kernel with Mosaic GPU (0.12 does not: skipped)
ONLY = ("tpu:v5e", "tpu:v2", "cuda:triton", *(("cuda:mosaic_gpu",) if mosaic_gpu_switch() else ()), "rocm:triton")


def _one(pattern: str) -> Harness:
    hs = catalog.select(catalog.Filters(catalog="pallas", name=(pattern,)))
    assert len(hs) == 1, [h.name for h in hs]
    return hs[0]


def _kept(h: Harness) -> dict[str, dict]:
    """What ``farm.run.bundles.priors`` sends for ``h``: {target: {"export": base64, "meta"}}."""
    recs, arts = run_pallas_kept(h, h.make_args(), Options(pallas_targets=ONLY))
    by_sha = {a.sha256: a for a in arts}
    out = {}
    for r in recs:
        if r.stage == "pallas_export" and r.ok:
            a = by_sha[r.artifact]
            out[r.platform] = {"export": base64.b64encode(a.data).decode(), "meta": {**a.meta, "target": r.platform}}
    return out


@pytest.fixture(scope="module")
def add() -> Harness:
    return _one("farm.add_grid_float32_16x256*")


@pytest.fixture(scope="module")
def kept(add: Harness) -> dict[str, dict]:
    return _kept(add)


def test_each_target_keeps_its_artifact_with_what_the_exporting_jax_saw(kept: dict[str, dict]) -> None:
    assert set(kept) == set(ONLY)
    for label, k in kept.items():
        meta = k["meta"]
        assert meta["stage"] == "pallas_export" and meta["format"] == "jax.export.serialize"
        assert meta["platforms"] == [label.split(":")[0]]
        assert meta["payloads"] and all(len(p["sha256"]) == 64 for p in meta["payloads"])
        assert isinstance(meta["calling_convention_version"], int)
    assert kept["cuda:triton"]["meta"]["disabled_checks"]  # the Triton custom call has no guarantee
    assert kept["tpu:v5e"]["meta"]["payloads"][0]["target"] == "tpu_custom_call"


def test_same_jax_reads_back_every_target_the_same(add: Harness, kept: dict[str, dict]) -> None:
    recs = run_pallas_prior(add, kept)
    assert {r.platform for r in recs} == set(ONLY)
    for r in recs:
        assert r.stage == "pallas_xver" and r.status == "ok", (r.platform, r.error)
        assert r.facts["deserialized"] and all(r.facts["same"].values()) and not r.facts["differs"]
        assert r.facts["execution"] == "not_runnable_here"
        assert r.facts["calling_convention"]["read"] == r.facts["calling_convention"]["exported"]


def test_an_edited_payload_is_flagged_by_the_judge(add: Harness, kept: dict[str, dict]) -> None:
    edited = json.loads(json.dumps(kept["tpu:v5e"]))
    edited["meta"]["payloads"][0]["sha256"] = "0" * 64  # the exporting jax saw another kernel
    (rec,) = run_pallas_prior(add, {"tpu:v5e": edited})
    assert rec.status == "fail" and rec.error_type == "PallasCrossVersionMismatch"
    assert rec.facts["same"]["payloads"] is False and "payloads changed" in rec.error


def test_a_changed_payload_in_the_bytes_is_flagged(add: Harness, kept: dict[str, dict]) -> None:
    """The artifact's own bytes carry another kernel (``sign``'s Triton artifact under
    ``add_grid``'s recorded meta): it deserializes, and the payload read back is not the one
    the exporting jax saw."""
    sign = _kept(_one("farm.sign_float32_16x256"))
    swapped = {"export": sign["cuda:triton"]["export"], "meta": kept["cuda:triton"]["meta"]}
    (rec,) = run_pallas_prior(add, {"cuda:triton": swapped})
    assert rec.status == "fail" and rec.facts["deserialized"], rec.facts
    assert "payloads" in rec.facts["differs"]


def test_bytes_that_do_not_deserialize_are_an_error_with_jax_s_words(add: Harness, kept: dict[str, dict]) -> None:
    bad = {"export": base64.b64encode(b"not an artifact").decode(), "meta": kept["tpu:v2"]["meta"]}
    (rec,) = run_pallas_prior(add, {"tpu:v2": bad})
    assert rec.status == "error" and rec.facts["deserialized"] is False and rec.error


def test_the_cross_job_path_carries_kernel_artifacts_without_an_ordinary_export(add: Harness,
                                                                                   kept: dict[str, dict]) -> None:
    """A prior with kernel artifacts only (what ``priors`` sends where the run made no
    ordinary export of the harness): the harness runs on the CPU, the kernels are read back,
    and no xhost record is made."""
    prior = Prior.from_json(json.loads(json.dumps({"meta": {"jax_version": "x"}, "pallas": kept})))
    assert prior.export == b"" and set(prior.pallas) == set(ONLY)
    out = run_harness(add, Options(platforms=("cpu",), run_on=("cpu",)), prior)
    xver = [r for r in out.records if r.stage == "pallas_xver"]
    assert len(xver) == len(ONLY) and all(r.status == "ok" for r in xver), [(r.platform, r.error) for r in xver]
    assert not [r for r in out.records if r.stage == "xhost"]


def test_versions_prints_a_line_about_them() -> None:
    from farm.analysis.versions import matrix, render_text

    row = {"harness": "h", "stage": "pallas_xver", "platform": "tpu:v5e", "status": "ok", "error": None,
           "facts": {"deserialized": True, "same": {"payloads": True}}}
    bad = {**row, "platform": "cuda:triton", "status": "fail", "error": "payloads changed",
           "facts": {"deserialized": True, "same": {"payloads": False}, "differs": {"payloads": {}}}}
    text = render_text(matrix({"1.0": []}, {("1.0", "2.0"): [row, bad]}))
    assert "pallas kernel artifacts" in text and "tpu 1/1 deserialized, 1 same" in text
    assert "cuda:triton 1/1 deserialized, 0 same" in text and "differs: payloads 1" in text


VENV = Path(os.environ.get("FARM_CACHE_DIR", Path.home() / ".cache" / "lowering-farm")) / "jax-envs" / "jax-0.9.2"


@pytest.mark.skipif(not (VENV / "bin" / "python").exists(), reason="the jax 0.9.2 venv is not cached here")
def test_jax_0_9_2_reads_this_jax_s_kernel_artifacts(tmp_path: Path, kept: dict[str, dict]) -> None:
    """The real other version, in its cached venv: this jax's artifacts deserialized there."""
    src = tmp_path / "kept.json"
    src.write_text(json.dumps(kept))
    code = ("import json,sys; from farm.catalog import Harness; from farm.pipeline.pallas import run_pallas_prior;"
            "k=json.load(open(sys.argv[1])); "
            "print(json.dumps([[r.platform, r.status, r.facts.get('deserialized'), r.error] "
            "for r in run_pallas_prior(None, k)]))")
    out = subprocess.run([str(VENV / "bin" / "python"), "-c", code, str(src)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert {g[0] for g in got} == set(ONLY)
    for label, status, deserialized, error in got:  # a record each; what 0.9.2 makes of them is the finding
        assert status in ("ok", "fail", "error"), (label, status, error)


_JAX_08_TPU_INFO = '''
import enum


class ChipVersion(enum.Enum):
    TPU_V4 = "v4"
    TPU_V5E = "v5e"


class TpuInfo:
    def __init__(self, *, chip_version, generation):
        self.chip_version, self.generation = chip_version, generation


def get_tpu_info(device_kind):
    match device_kind:
        case "TPU v4":
            return TpuInfo(chip_version=ChipVersion.TPU_V4, generation=4)
        case "TPU v5 lite" | "TPU v5e":
            return TpuInfo(chip_version=ChipVersion.TPU_V5E, generation=5)
        case _:
            raise ValueError(device_kind)
'''


def test_tpu_generations_are_read_from_a_jax_without_chip_version_from_device_kind(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """jax 0.8 names each device kind's chip only inside get_tpu_info's cases: the pallas catalog
    under --jax 0.8.3 was 18 farm errors (AttributeError on chip_version_from_device_kind)."""
    import importlib.util

    import jax._src.pallas.mosaic.tpu_info  # noqa: F401  (the real one, put back afterwards)
    import jax._src.pallas.mosaic as mosaic

    from farm.catalog import pallas

    path = tmp_path / "tpu_info_08.py"
    path.write_text(_JAX_08_TPU_INFO)
    spec = importlib.util.spec_from_file_location("tpu_info_08", path)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    assert not hasattr(old, "chip_version_from_device_kind")
    monkeypatch.setattr(mosaic, "tpu_info", old)
    monkeypatch.setitem(sys.modules, "jax._src.pallas.mosaic.tpu_info", old)
    pallas.generations.cache_clear()
    try:
        got = [(t.label, t.device_kind) for t in pallas.generations()]
    finally:
        pallas.generations.cache_clear()
    assert got == [("tpu:v4", "TPU v4"), ("tpu:v5e", "TPU v5 lite")]
