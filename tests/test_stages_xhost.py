"""Cross-host replay (the xhost stage) and the standalone device-host path, on CPU.

On a GPU host the same code runs the CPU host's artifacts on the GPU (tests/test_gpu.py);
here the "other host" is this one, which is enough to see each comparison catch what it
must catch."""
from __future__ import annotations

import gzip
import json
import dataclasses
from dataclasses import replace

import numpy as np
import pytest

from farm import catalog
from farm.pipeline import run_harness
from farm.results import Options, Outcome
from farm.stages.xhost import Prior

CPU = Options(platforms=("cpu",), run_on=("cpu",), crossexec=False, repeats=1)

# These run the CPU path (cpu modules compiled on the default backend); on a GPU host the
# same code is checked by tests/test_gpu.py.
pytestmark = pytest.mark.skipif(__import__("jax").default_backend() != "cpu",
                                reason="CPU-host path; a GPU host runs tests/test_gpu.py")


def _one(primitive: str, dtype: str = "float32") -> catalog.Harness:
    return catalog.select(catalog.Filters.parse(group=primitive, dtype=dtype))[0]


def _prior_of(out: Outcome) -> Prior:
    """What a CPU host would ship: the serialized export and the io artifact of its run."""
    export = next(a for a in out.artifacts if a.kind == "export")
    io_art = next(a for a in out.artifacts if a.kind == "io")
    return Prior.from_blobs(export.data, io_art.data, {"jax_version": "test", "platforms": ["cpu"]})


def _xhost(out: Outcome):  # noqa: ANN202
    (rec,) = [r for r in out.records if r.stage == "xhost"]
    return rec


def test_prior_survives_json() -> None:
    h = _one("sin")
    prior = _prior_of(run_harness(h, CPU))
    back = Prior.from_json(json.loads(json.dumps(prior.to_json())))
    assert back.export == prior.export and back.meta == prior.meta
    assert all(np.array_equal(a, b) for a, b in zip(back.inputs, prior.inputs))
    assert all(np.array_equal(a, b) for a, b in zip(back.outputs, prior.outputs))


@pytest.mark.parametrize("primitive", ["sin", "add", "cumsum"])
def test_artifact_from_another_run_agrees_three_ways(primitive: str) -> None:
    h = _one(primitive)
    prior = _prior_of(run_harness(h, CPU))
    x = _xhost(run_harness(h, CPU, prior))
    assert x.status == "ok", x.error
    assert x.facts["inputs_identical"] is True
    assert x.facts["vs_cpu_host"] == x.facts["vs_native"] == x.facts["vs_reference"] == "ok"


def test_different_outputs_on_the_lowering_host_are_a_finding() -> None:
    h = _one("sin")
    prior = _prior_of(run_harness(h, CPU))
    bad = replace(prior, outputs=[o + np.float32(0.5) for o in prior.outputs])
    x = _xhost(run_harness(h, CPU, bad))
    assert x.status == "fail" and "cpu host" in x.error
    assert x.facts["vs_cpu_host"] == "fail"
    assert x.facts["vs_native"] == x.facts["vs_reference"] == "ok"


def test_other_inputs_skip_the_reference_but_still_compare_with_the_lowering_host() -> None:
    import jax

    h = _one("sin")
    prior = _prior_of(run_harness(h, CPU))
    ins = [a + np.float32(1.0) for a in prior.inputs]
    outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(
        jax.export.deserialize(bytearray(prior.export)).call(*ins))]
    x = _xhost(run_harness(h, CPU, replace(prior, inputs=ins, outputs=outs)))
    assert x.status == "ok" and x.facts["inputs_identical"] is False
    assert x.facts["vs_native"] == x.facts["vs_reference"] == "skipped"
    assert x.facts["vs_cpu_host"] == "ok"


def test_corrupt_artifact_is_an_error_not_a_crash() -> None:
    h = _one("sin")
    prior = _prior_of(run_harness(h, CPU))
    x = _xhost(run_harness(h, CPU, replace(prior, export=prior.export[:40])))
    assert x.status == "error" and x.error_type


def test_spread_interleaves_groups() -> None:
    from workers.standalone import spread

    hs = catalog.select(catalog.Filters.parse(group="sin,add", dtype="float32,float16,int32"))
    order = spread(hs)
    assert sorted(h.name for h in order) == sorted(h.name for h in hs)
    first = [h.group for h in order[:len({h.group for h in hs})]]
    assert len(set(first)) == len(first)  # every group once before any group twice


@pytest.mark.slow
def test_jobs_with_priors_from_a_store_run_standalone_and_import(sqlite_url: str, tmp_path) -> None:  # noqa: ANN001
    """CPU-host run in the store → jobs file with its artifacts → standalone workers → import."""
    from farm.run import bundles as bundle
    from farm.host import describe
    from farm.store import open_store, writes
    from farm.store.models import ResultRow
    from workers.standalone import run_jobs

    hs = catalog.select(catalog.Filters.parse(group="sin,add,exp", dtype="float32"))
    store = open_store(sqlite_url)
    outs = [run_harness(h, CPU) for h in hs]
    with store.session() as s:
        run = writes.create_run(s, env=describe(), name="cpu-host", catalog="farm", filters={},
                                platforms=["cpu"], run_on=["cpu"], total=len(hs))
        ids = writes.harness_ids(s, hs)
        writes.Writer(s, run, ids).write(outs, worker="test")
        writes.finish_run(s, run, "finished")
    fps = [h.fingerprint for h in hs]
    pri = bundle.priors(store, "cpu-host", fps, [h.name for h in hs])
    assert set(pri) == set(fps)
    jobs = {"catalog": "farm", "modules": [], "fingerprints": fps, "names": [h.name for h in hs],
            "timeout_s": 120, "priors": pri,
            "options": {"platforms": ["cpu"], "run_on": ["cpu"], "crossexec": False, "keep_modules": False}}
    path = tmp_path / "jobs.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(jobs, f)
    counts = run_jobs(str(path), str(tmp_path / "b.json.gz"), workers=2, log=lambda *a, **k: None)
    assert counts == {**counts, "jobs": 3, "run": 3, "missing": 0, "unrun": 0}
    run_id, _, n = bundle.import_bundle(store, str(tmp_path / "b.json.gz"), name="device-host")
    assert n == 3
    with store.session() as s:
        rows = s.query(ResultRow).filter_by(run_id=run_id, stage="xhost").all()
        assert len(rows) == 3 and {r.status for r in rows} == {"ok"}
        assert all(r.facts["vs_cpu_host"] == "ok" for r in rows)


def test_deadline_zero_starts_nothing_and_says_so(tmp_path) -> None:  # noqa: ANN001
    from farm.run import bundles as bundle
    from workers.standalone import run_jobs

    hs = catalog.select(catalog.Filters.parse(group="sin", dtype="float32,float16"))
    jobs = {"catalog": "farm", "modules": [], "fingerprints": [h.fingerprint for h in hs] + ["0" * 20],
            "names": [h.name for h in hs] + ["no_such_harness"], "options": {"platforms": ["cpu"]}}
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    counts = run_jobs(str(path), str(tmp_path / "b.json.gz"), deadline_s=0.0, log=lambda *a, **k: None)
    assert counts["run"] == 0 and counts["unrun"] == len(hs) and counts["missing"] == 1
    assert bundle.read(str(tmp_path / "b.json.gz"))["run"]["stats"]["unrun"] == len(hs)


def test_split_bundle_keeps_only_chosen_artifacts_and_imports_as_one_run(sqlite_url: str, tmp_path) -> None:  # noqa: ANN001
    from farm.run import bundles as bundle
    from farm.store import open_store
    from farm.store.models import ResultRow
    from workers.standalone import run_jobs

    hs = catalog.select(catalog.Filters.parse(group="sin,add,exp", dtype="float32"))
    jobs = {"catalog": "farm", "modules": [], "fingerprints": [h.fingerprint for h in hs],
            "names": [h.name for h in hs], "keep_artifacts": ["io"], "per_bundle": 2,
            "options": {"platforms": ["cpu"], "run_on": ["cpu"], "crossexec": False}}
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    counts = run_jobs(str(path), str(tmp_path / "b.json.gz"), log=lambda *a, **k: None)
    assert [p.rsplit("/", 1)[1] for p in counts["bundles"]] == ["b-1.json.gz", "b-2.json.gz"]
    docs = [bundle.read(p) for p in counts["bundles"]]
    assert [len(d["outcomes"]) for d in docs] == [2, 1]
    assert {a["kind"] for d in docs for o in d["outcomes"] for a in o["artifacts"]} == {"io"}
    store = open_store(sqlite_url)
    run_id, _, n = bundle.import_bundle(store, counts["bundles"], name="split")
    assert n == 3
    with store.session() as s:
        rows = s.query(ResultRow).filter_by(run_id=run_id).all()
        assert {r.stage for r in rows} >= {"trace", "serialize", "execute"}
        assert all(r.artifact_sha is None for r in rows if r.stage == "serialize")
        assert all(r.artifact_sha for r in rows if r.stage == "execute")


def test_bfloat16_inputs_and_outputs_survive_the_io_artifact() -> None:
    from farm.formats import iofile

    h = _one("sin", "bfloat16")
    out = run_harness(h, CPU)
    prior = _prior_of(out)
    assert [a.dtype.name for a in prior.inputs + prior.outputs] == ["bfloat16", "bfloat16"]
    ins, outs = iofile.unpack(iofile.pack(prior.inputs, prior.outputs))
    assert ins[0].tobytes() == prior.inputs[0].tobytes() and outs[0].dtype == prior.outputs[0].dtype
    x = _xhost(run_harness(h, CPU, prior))
    assert x.status == "ok" and x.facts["vs_cpu_host"] == "ok" and x.facts["native_vs_cpu_host"] == "ok", x.error


def test_artifact_without_this_platform_is_not_runnable_here() -> None:
    import jax

    h = _one("sin")
    args = h.make_args()
    exp = jax.export.export(jax.jit(h.fun), platforms=("tpu",))(*args)
    prior = Prior(bytes(exp.serialize()), [np.asarray(a) for a in args], [], {"platforms": ["tpu"]})
    x = _xhost(run_harness(h, CPU, prior))
    assert x.status == "not_runnable_here" and "tpu" in x.error


def test_an_upstream_artifact_is_judged_by_the_jaxpr_reference() -> None:
    """JAX's own catalog has no reference arrays: another host's (another jax's) artifact is
    judged by the harness's jaxpr evaluated in float64, so a wrong artifact fails against the
    reference as well as against this host's own lowering."""
    import jax
    import jax.numpy as jnp

    h = catalog.select(catalog.Filters.parse(catalog="upstream", group="tanh", dtype="float32"))[0]
    assert h.reference is None and h.invariant is None
    prior = _prior_of(run_harness(h, CPU))
    x = _xhost(run_harness(h, CPU, prior))
    assert x.status == "ok", x.error
    assert (x.facts["vs_reference"], x.facts["reference_by"]) == ("ok", "jaxpr")
    # an artifact that computes sin where tanh was exported: consistent with its own outputs only
    wrong = jax.export.export(jax.jit(jnp.sin), platforms=["cpu"])(*[jax.ShapeDtypeStruct(a.shape, a.dtype)
                                                                       for a in prior.inputs])
    outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(wrong.call(*prior.inputs))]
    x = _xhost(run_harness(h, CPU, replace(prior, export=bytes(wrong.serialize()), outputs=outs)))
    assert x.status == "fail"
    assert x.facts["vs_reference"] == "fail" and x.facts["vs_native"] == "fail" and x.facts["vs_cpu_host"] == "ok"


#: Run in a process with 8 host devices: each named farm harness once, then ``CHECK`` (below)
#: on its artifacts; prints {name: CHECK's result} as JSON.
EIGHT_DEVICES = """
import dataclasses, json, sys
import jax, numpy as np
from farm import catalog
from farm.pipeline import meshes, run_harness
from farm.results import Options
from farm.formats import iofile
from farm.stages.export import run_exported
from farm.stages.xhost import Prior
cpu = Options(platforms=("cpu",), run_on=("cpu",), crossexec=False, repeats=1)
out = {}
for name in sys.argv[1:]:
    h = next(x for x in catalog.select(catalog.Filters.parse(catalog="farm")) if x.name == name)
    art = {a.kind: a for a in run_harness(h, cpu).artifacts}
CHECK
print(json.dumps(out))
"""

#: the artifact as another host's: the xhost record of running it here
AS_PRIOR = """
    prior = Prior.from_blobs(art["export"].data, art["io"].data, {"jax_version": "test"})
    (x,) = [r for r in run_harness(h, cpu, prior).records if r.stage == "xhost"]
    out[name] = [x.status, x.error, x.facts.get("vs_native"), x.facts.get("vs_reference")]
"""

#: the artifact as jax before 2026 wrote it (HLO shardings only, no NamedShardings with their
#: mesh), run under the harness's mesh: whether it gives the first run's outputs
AS_OLD_JAX = """
    exp = jax.export.deserialize(bytearray(art["export"].data))
    old = dataclasses.replace(exp, _has_named_shardings=False, _in_named_shardings=(None,) * len(exp.in_avals),
                              _out_named_shardings=(None,) * len(exp.out_avals))
    ins, outs = iofile.unpack(art["io"].data)
    with meshes.mesh_context(h, 8):
        got = run_exported(old, ins)
    out[name] = all(np.array_equal(a, b) for a, b in zip(got, outs))
"""


def _with_eight_devices(check: str, names: list[str]) -> dict:
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    p = subprocess.run([sys.executable, "-c", EIGHT_DEVICES.replace("CHECK", check.strip("\n")), *names], env=env,
                       capture_output=True, text=True, timeout=300, cwd=root)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_multi_device_artifact_runs_under_its_shardings() -> None:
    """A sharded artifact (shard_map collectives; a NamedSharding jit under Shardy) is run on as
    many of this host's devices as it was exported for, with its own mesh, not on one."""
    names = ["pmax_float32_8x4", "sharding_psum.psum_float32_4x8_mesh=2x4_partitioner=shardy"]
    got = _with_eight_devices(AS_PRIOR, names)
    for name in names:
        assert got[name] == ["ok", None, "ok", "ok"], (name, got[name])


def test_a_host_with_too_few_devices_cannot_run_the_artifact() -> None:
    from farm.stages.export import NotEnoughDevices, run_exported

    class Big:  # the fields run_exported reads before it needs the devices
        nr_devices = 10_000
        in_avals = out_avals = ()

    with pytest.raises(NotEnoughDevices, match="exported for 10000 devices"):
        run_exported(Big(), [])


def test_an_older_jaxs_sharded_artifact_runs_from_its_hlo_shardings() -> None:
    """Artifacts from jax versions that recorded only HLO shardings (no mesh) run on this
    host's devices from those shardings: the cross-version matrix's 0.8.3 exports."""
    from jax._src.export import _export

    if "_has_named_shardings" not in {f.name for f in dataclasses.fields(_export.Exported)}:
        pytest.skip("this jax (0.12 and later) has no Exported without named shardings to make: an older "
                    "jax's artifact is read from its own bytes (the version sweeps' cross runs)")
    names = ["sharding_all_to_all.all_to_all_float32_4x8_mesh=2x4_partitioner=gspmd",
             "sharding_explicit_reduce.explicit_reduce_float32_8x8_axes=explicit_mesh=2x2x2_partitioner=shardy"]
    assert _with_eight_devices(AS_OLD_JAX, names) == {n: True for n in names}


def test_an_artifact_failing_where_the_compare_is_a_known_gap_is_expected_fail() -> None:
    """XLA CPU's atan2 on subnormals is a declared compare limitation: the same failure of
    another host's artifact against the reference is that known gap, not a new finding."""
    h = next(x for x in catalog.select(catalog.Filters.parse(primitive="atan2", dtype="float32"))
             if x.group == "special_values")
    prior = _prior_of(run_harness(h, CPU))
    x = _xhost(run_harness(h, CPU, prior))
    assert x.status == "expected_fail", (x.status, x.error)
    assert x.facts["vs_reference"] == "fail" and x.facts["vs_native"] == "ok" and "atan2" in x.facts["limitation"]
    # a different failure (the artifact disagrees with this host's own lowering) stays a finding
    bad = replace(prior, outputs=[o + np.float32(0.5) for o in prior.outputs])
    assert _xhost(run_harness(h, CPU, bad)).status == "fail"
