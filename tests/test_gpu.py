"""Native GPU path: the same stage code compiling and running the cuda module on a GPU,
and the CPU host's artifacts run on the GPU (the xhost stage).

Skipped cleanly (one reason) on hosts without an NVIDIA GPU, which includes CI."""
from __future__ import annotations

import gzip
import json

import pytest


def _gpu() -> bool:
    try:
        import jax

        return bool(jax.devices("gpu"))
    except Exception:
        return False


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _gpu(), reason="no NVIDIA GPU on this host")]


def _select(**kw: str):  # noqa: ANN202
    from farm import catalog

    return catalog.select(catalog.Filters.parse(**kw))


def test_native_cuda_matches_reference_and_records_device_memory() -> None:
    from farm.pipeline import run_harness
    from farm.results import Options

    hs = _select(primitive="exp,sin,add,mul,cumsum", dtype="float32,float16")
    assert hs
    for h in hs:
        out = run_harness(h, Options(platforms=("cpu", "cuda"), run_on=("gpu",)))
        st = {(r.stage, r.platform): r for r in out.records}
        assert st[("compile", "cuda")].status == "ok", (h.name, st[("compile", "cuda")].error)
        assert st[("compare", "cuda")].status == "ok", (h.name, st[("compare", "cuda")].error)
        ex = st[("execute", "cuda")]
        assert ex.metrics["device_peak_bytes_in_use"] > 0


def test_cpu_backend_artifact_runs_on_gpu_and_agrees_three_ways() -> None:
    """A Prior made with the CPU backend (export for cpu+cuda, CPU outputs) run on the GPU."""
    import jax
    import numpy as np

    from farm.pipeline import run_harness

    from farm.results import Options
    from farm.stages.xhost import Prior

    (h,) = _select(primitive="sin", dtype="float32")
    args = h.make_args()
    exp = jax.export.export(jax.jit(h.fun), platforms=("cpu", "cuda"))(*args)
    with jax.default_device(jax.devices("cpu")[0]):
        cpu_out = [np.asarray(x) for x in jax.tree_util.tree_leaves(exp.call(*args))]
    prior = Prior(bytes(exp.serialize()), [np.asarray(a) for a in args], cpu_out, {"jax_version": jax.__version__})
    out = run_harness(h, Options(platforms=("cuda",), run_on=("gpu",)), prior)
    (x,) = [r for r in out.records if r.stage == "xhost"]
    assert x.platform == "cuda" and x.status == "ok", x.error
    assert x.facts["vs_cpu_host"] == x.facts["vs_native"] == x.facts["vs_reference"] == "ok"


def test_standalone_worker_on_gpu_writes_an_importable_bundle(tmp_path) -> None:  # noqa: ANN001
    from farm.run import bundles as bundle
    from workers.standalone import run_jobs

    hs = _select(primitive="exp,add,cumsum", dtype="float32")
    jobs = {"catalog": "farm", "modules": [], "fingerprints": [h.fingerprint for h in hs],
            "names": [h.name for h in hs], "timeout_s": 120,
            "options": {"platforms": ["cpu", "cuda"], "run_on": ["gpu"], "keep_modules": False}}
    path = tmp_path / "jobs.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(jobs, f)
    counts = run_jobs(str(path), str(tmp_path / "b.json.gz"), workers=2, log=lambda *a, **k: None)
    assert counts["run"] == len(hs) and counts["missing"] == 0
    with gzip.open(tmp_path / "b.json.gz", "rt") as f:
        doc = json.load(f)
    try:  # the importing host's check; a device host may lack its jsonschema (the H200 did)
        import jsonschema  # noqa: F401
    except ImportError:
        pass
    else:
        doc = bundle.read(str(tmp_path / "b.json.gz"))
    assert "gpu" in doc["environment"]["device_kinds"]
    for o in doc["outcomes"]:
        st = {(r["stage"], r["platform"]): r["status"] for r in o["records"]}
        assert st[("compare", "cuda")] == "ok", (o["name"], st)
