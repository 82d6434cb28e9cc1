"""Several device kinds in one sweep, on CPU: a local cluster that declares a GPU to Ray
(``num_gpus``) runs ``--run-on cpu,gpu``; each kind's actors hold Ray's own resources
and are pinned to their backend and memory share; a gpu worker on this GPU-less host
says not_runnable_here rather than compiling on the CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from farm.platforms import pinned_env, ray_request
from farm.run.sweep import merge_kinds
from farm.results import Outcome, Record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


def test_requests_and_pins_per_kind() -> None:
    assert ray_request("gpu", 0.5) == {"num_cpus": 0, "num_gpus": 0.5}
    assert ray_request("tpu") == {"num_cpus": 0, "resources": {"TPU": 1}}
    assert ray_request("cpu")["num_cpus"] == 1
    assert pinned_env("cpu") == {"JAX_PLATFORMS": "cpu"}
    env = pinned_env("gpu", 0.25, "rocm")
    assert env["JAX_PLATFORMS"] == "rocm" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert 0 < float(env["XLA_PYTHON_CLIENT_MEM_FRACTION"]) <= 0.25
    # auto: no backend pin (the GPU plugin jax loads decides), the memory share still is
    assert pinned_env("gpu", 0.5, "auto") == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                                              "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.450"}
    with pytest.raises(ValueError, match="gpu_fraction"):
        ray_request("gpu", 0.0)


def test_merge_keeps_each_kinds_native_records_once() -> None:
    cpu = Outcome("f", "h", (Record("trace", "any", "ok"), Record("compile", "cpu", "ok"),
                             Record("execute", "cpu", "ok")), worker="ray:a:1", result_key="k")
    gpu = Outcome("f", "h", (Record("trace", "any", "ok"), Record("compile", "cuda", "ok"),
                             Record("execute", "cuda", "ok")), worker="ray:b:2", result_key="k")
    m = merge_kinds({"cpu": cpu, "gpu": gpu}, ("cpu", "gpu"))
    assert [(r.stage, r.platform) for r in m.records] == [("trace", "any"), ("compile", "cpu"), ("execute", "cpu"),
                                                          ("compile", "cuda"), ("execute", "cuda")]
    assert m.worker == "ray:a:1 ray:b:2" and m.result_key == "k"
    dead = Outcome.failed("f", "h", "crashed", "worker process died")
    m = merge_kinds({"cpu": cpu, "gpu": dead}, ("cpu", "gpu"))
    assert ("execute", "cuda", "crashed") in [(r.stage, r.platform, r.status) for r in m.records]
    assert m.worst == "crashed" and m.result_key is None


SCRIPT = r"""
import json, sys, ray
from farm import catalog
from farm.results import Options
from farm.run.cluster import Worker
from farm.run.sweep import SweepConfig, sweep
from farm.store import open_store, queries

# a CPU host that declares one GPU to Ray, as `ray start --num-gpus 1` would
ray.init(address="local", num_cpus=2, num_gpus=1, resources={"cpu_slot": 2}, include_dashboard=False,
         log_to_driver=False, configure_logging=False)
out = {}
# each kind's actor: Ray's own resources, and pinned to its backend and memory share
ws = {k: Worker.start(k, "farm", [], {"platforms": ["cpu"], "run_on": [k]}, {}, gpu_fraction=0.5)
      for k in ("cpu", "gpu")}
out["info"] = {k: ray.get(w.actor.info.remote(), timeout=180) for k, w in ws.items()}
for w in ws.values():
    w.kill()
store = open_store(sys.argv[1])
hs = catalog.select(catalog.Filters.parse(primitive="sin,add", dtype="float32"))
run, stats = sweep(store, hs, options=Options(platforms=("cpu", "cuda"), run_on=("cpu", "gpu")), catalog="farm",
                   filters={}, config=SweepConfig(workers=2, gpu_fraction=0.5, startup_s=120))
with store.session() as s:
    out["rows"] = [{k: r[k] for k in ("harness", "stage", "platform", "status", "error")}
                   for r in queries.results(s, run.id)]
    out["workers"] = {r["worker"] for r in s.execute(__import__("sqlalchemy").text(
        "select worker from harness_outcomes where run_id = :r"), {"r": run.id}).mappings()}
    out["envs"] = queries.resolve_run(s, run.name).stats["worker_environments"]
    from farm.analysis.workers import group_results
    from farm.store.workers import outcome_counts, result_counts, worker_environments
    r = queries.resolve_run(s, run.name)
    out["groups"] = group_results(worker_environments(r), result_counts(s, r))
    out["outcome_groups"] = group_results(*outcome_counts(s, [run.id])[run.id])
from farm.commands.show import print_run
print_run(store, run.name)
out["workers"] = sorted(out["workers"])
out["n"] = len(hs)
out["done"] = stats.done
print("RESULT " + json.dumps(out, default=str))
ray.shutdown()
"""


@pytest.mark.slow(reason="a sweep on each device kind's Ray workers")
def test_sweep_runs_every_harness_on_each_kind(tmp_path) -> None:  # noqa: ANN001
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "PYTHONPATH": ROOT,
           "RAY_USAGE_STATS_ENABLED": "0"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, f"sqlite:///{tmp_path / 'k.db'}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=500)
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, r.stderr[-3000:]
    out = json.loads(line[len("RESULT "):])
    cpu, gpu = out["info"]["cpu"], out["info"]["gpu"]
    assert gpu["ray_resources"].get("GPU") == 0.5 and gpu["gpu_ids"]
    assert "GPU" not in cpu["ray_resources"] and cpu["ray_resources"].get("CPU") == 1
    assert cpu["pinned"]["JAX_PLATFORMS"] == "cpu"
    # each worker reports the platform it runs natively: a real CPU worker "cpu"; a gpu worker
    # here finds no GPU backend and falls back to the one it is pinned to
    assert cpu["platform"] == "cpu" and gpu["platform"] == "cuda"
    assert gpu["pinned"] == {"JAX_PLATFORMS": "cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                             "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.450"}
    assert "no gpu device" in gpu["missing_device"]
    # each worker describes its own environment: pinned backend, devices, jaxlib revision
    assert gpu["environment"]["pinned"]["JAX_PLATFORMS"] == "cuda" and gpu["environment"]["devices"] == []
    assert cpu["environment"]["devices"][0]["platform"] == "cpu" and cpu["environment"]["jaxlib_version"]
    rows = out["rows"]
    assert out["done"] == out["n"] == len({r["harness"] for r in rows})
    for h in {r["harness"] for r in rows}:
        mine = {(r["stage"], r["platform"]): r for r in rows if r["harness"] == h}
        assert mine[("execute", "cpu")]["status"] == "ok"  # the cpu lane ran natively
        # the gpu lane ran on a gpu worker, which found no GPU here and said so
        assert mine[("execute", "cuda")]["status"] == "not_runnable_here"
        assert "no gpu device" in mine[("execute", "cuda")]["error"]
    # each outcome names its workers (one per kind); the run keeps each worker's own environment
    envs = out["envs"]
    for label in out["workers"]:
        kinds = {envs[w]["device_kind"] for w in label.split()}
        assert kinds == {"cpu", "gpu"}, (label, envs.keys())
    by_kind = {e["device_kind"]: e for e in envs.values()}
    assert by_kind["gpu"]["pinned"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and by_kind["gpu"]["devices"] == []
    assert by_kind["cpu"]["pinned"] == {"JAX_PLATFORMS": "cpu"} and by_kind["cpu"]["fingerprint"]
    assert by_kind["cpu"]["platform"] == "cpu" and by_kind["gpu"]["platform"] == "cuda"
    # what Ray gave each actor is recorded with its environment
    assert by_kind["gpu"]["ray"]["resources"] == {"GPU": 0.5} and by_kind["gpu"]["ray"]["gpu_ids"] == ["0"]
    assert "GPU" not in by_kind["cpu"]["ray"]["resources"]
    cpu_dev = by_kind["cpu"]["devices"][0]
    assert cpu_dev["memory_bytes"] > 0 and cpu_dev["platform_version"] and by_kind["cpu"]["jaxlib_revision"]
    # results grouped by the environment of the worker that produced them: the cpu workers
    # produced the upstream stages and the cpu native ones, the gpu workers the cuda native ones
    groups = {g["environment"]["device_kind"]: g for g in out["groups"]}
    assert set(groups) == {"cpu", "gpu"} and len(out["groups"]) == 2
    assert set(groups["gpu"]["platforms"]) == {"cuda"}
    assert groups["gpu"]["platforms"]["cuda"] == {"not_runnable_here": 2 * out["n"]}  # compile + execute
    assert groups["cpu"]["platforms"]["cpu"].get("ok") and "any" in groups["cpu"]["platforms"]
    assert "execute" not in {r["stage"] for r in rows if r["platform"] == "cuda" and r["status"] == "ok"}
    assert "JAX_PLATFORMS=cuda" in groups["gpu"]["summary"] and "gpu -> cuda" in groups["gpu"]["summary"]
    assert sum(g["results"] for g in out["groups"]) == len(rows)
    # whole outcomes: each counts under both kinds' workers
    assert sorted(g["results"] for g in out["outcome_groups"]) == [out["n"], out["n"]]
    # `farm show` prints the groups
    assert "by worker environment (2):" in r.stdout and "gpu -> cuda" in r.stdout
    # the dashboard's runs page groups each run's harnesses by worker environment
    from dashboards.app import create_app

    page = create_app(f"sqlite:///{tmp_path / 'k.db'}").test_client()
    runs = page.get("/runs.json").get_json()["runs"]
    assert {g["environment"]["device_kind"] for g in runs[0]["worker_environments"]} == {"cpu", "gpu"}
    html = page.get("/runs").get_data(as_text=True)
    assert "2 worker environments" in html and "gpu -&gt; cuda" in html


def test_group_results_by_worker_environment() -> None:
    from farm.analysis.workers import group_results

    base = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11", "pinned": {}}
    envs = {"ray:a:1": {**base, "device_kind": "cpu", "platform": "cpu", "host": "n1"},
            "ray:a:2": {**base, "device_kind": "cpu", "platform": "cpu", "host": "n2"},  # same env, other host
            "ray:b:3": {**base, "device_kind": "gpu", "platform": "rocm", "host": "n3",
                        "accelerator": {"rocm_version": "6.3.0"}}}
    rows = [("ray:a:1 ray:b:3", "any", "trace", "ok", 2), ("ray:a:1 ray:b:3", "rocm", "lower", "ok", 2),
            ("ray:a:1 ray:b:3", "rocm", "execute", "fail", 2), ("ray:a:2 ray:b:3", "cpu", "execute", "ok", 1),
            ("ray:a:2 ray:b:3", "rocm", "crossexec", "ok", 1), ("cache", "cpu", "execute", "ok", 5)]
    cpu, gpu, none = group_results(envs, rows)
    assert cpu["workers"] == ["ray:a:1", "ray:a:2"] and cpu["hosts"] == ["n1", "n2"]
    assert cpu["platforms"] == {"any": {"ok": 2}, "cpu": {"ok": 1}, "rocm": {"ok": 3}}  # lowered and crossexec on cpu
    assert gpu["platforms"] == {"rocm": {"fail": 2}} and "ROCm 6.3.0" in gpu["summary"]
    assert none["key"] == "" and none["results"] == 5 and "not recorded" in none["summary"]


def test_farm_worker_node_declares_plain_ray_gpus() -> None:
    from workers.node import node_command

    cmd = node_command("127.0.0.1:6379", 4, ["gpu"], None)
    assert "--num-gpus=1" in cmd and not any("gpu_slot" in c for c in cmd)
    assert '--resources={"cpu_slot": 4}' in cmd
    cmd = node_command("127.0.0.1:6379", 2, [], 8)
    assert "--num-gpus=8" in cmd


def test_platform_from_what_the_backend_reports() -> None:
    from farm.platforms import platform_of

    # jax says "gpu" for CUDA and ROCm devices alike: the client's name and version tell them apart
    assert platform_of("gpu", "cuda", "PJRT C API\ncuda 12080\ncudnn 91000") == "cuda"
    assert platform_of("gpu", "rocm", "PJRT C API\nrocm 60300") == "rocm"
    assert platform_of("gpu", "", "rocm 60300") == "rocm" and platform_of("gpu", "", "") == "cuda"
    assert platform_of("cpu", "cpu", "cpu") == "cpu" and platform_of("tpu", "tpu", "PJRT C API\nlibtpu") == "tpu"
    assert platform_of("METAL", "METAL", "metal_pjrt 0.1") == "metal"  # a PJRT plugin is its own platform


def test_a_real_cpu_process_reports_cpu() -> None:
    from farm.platforms import backend_platform, native_platform

    assert backend_platform("cpu") == "cpu" and native_platform("cpu") == "cpu"
    assert native_platform("tpu") == "tpu"


def test_plugin_platforms_as_targets() -> None:
    from farm.errors import UnknownName
    from farm.platforms import PluginMissing, check_targets, parse_targets, plugin_platforms, ray_request
    from workers.node import node_resources

    assert "cuda" not in plugin_platforms() and "cpu" not in plugin_platforms()
    assert parse_targets("cpu,cuda", ("cpu", "cuda", "rocm", "tpu"), "platform") == ("cpu", "cuda")
    with pytest.raises(UnknownName):  # a typo of a built-in platform stays a typo
        parse_targets("cpu,cdua", ("cpu", "cuda", "rocm", "tpu"), "platform")
    with pytest.raises(PluginMissing, match="needs its plugin installed on the lowering host"):
        check_targets(("cpu", "neuron"), ())
    with pytest.raises(PluginMissing, match="'neuron'"):
        parse_targets("cpu,neuron", ("cpu", "gpu", "tpu"), "device kind")
    # a jobs file for a device host: that host lowers, and checks for the plugin itself
    assert parse_targets("cpu,neuron", ("cpu", "gpu", "tpu"), "device kind", here=False) == ("cpu", "neuron")
    # a plugin kind: its own Ray resource, advertised by `farm worker` for the devices it finds
    assert ray_request("neuron") == {"num_cpus": 0, "resources": {"neuron_slot": 1}}
    assert node_resources(2, ["neuron"], {"metal": 1}) == {"cpu_slot": 2, "neuron_slot": 1, "metal_slot": 1}


def test_a_worker_without_the_plugin_says_so() -> None:
    from workers.runtime import JobRunner
    from farm import catalog

    h = catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))[0]
    runner = JobRunner("farm", [], {"platforms": ["cpu", "neuron"], "run_on": ["cpu"]})
    out = runner.run_one(h.fingerprint)
    (rec,) = out.records
    assert rec.status == "error" and rec.error_type == "PluginMissing" and "'neuron'" in rec.error
    assert runner.info()["platform"] == "cpu" and out.stamp.environment["platform"] == "cpu"


FAKE_PLUGIN = '''"""A stand-in PJRT plugin: registers platform "fakeplug", backed by XLA's CPU client."""


def initialize():
    from jax._src import xla_bridge as xb
    from jax._src.lib import xla_client

    xb.register_backend_factory("fakeplug", lambda: xla_client.make_cpu_client(), priority=-100)
'''


@pytest.mark.slow(reason="a PJRT plugin platform registered in fresh Ray workers and swept")
def test_a_pjrt_plugin_platform_is_a_sweep_target(tmp_path) -> None:  # noqa: ANN001
    """A plugin found through the ``jax_plugins`` namespace package: ``--platforms`` and
    ``--run-on`` take its platform; its worker holds the plugin's slot, is pinned to it and
    says so; without the plugin on the lowering host the sweep refuses in one line."""
    plugin = tmp_path / "plugin" / "jax_plugins" / "fakeplug"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(FAKE_PLUGIN)
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_USAGE_STATS_ENABLED": "0"}
    db = f"sqlite:///{tmp_path / 'p.db'}"
    args = [sys.executable, "-m", "farm", "sweep", "--db", db, "--primitive", "sin", "--dtype", "float32",
            "--platforms", "cpu,fakeplug", "--run-on", "cpu,fakeplug", "--workers", "1", "--name", "plug"]
    r = subprocess.run(args, cwd=ROOT, env={**env, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "'fakeplug' is neither a built-in platform" in r.stderr, r.stderr[-2000:]
    assert "needs its plugin installed on the lowering host" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(args, cwd=ROOT, env={**env, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path / 'plugin'}"},
                       capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-m", "farm", "show", "plug", "--db", db, "--format", "json"], cwd=ROOT,
                       env={**env, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=120)
    data = json.loads(r.stdout)
    for h in data["harnesses"]:
        assert h["platforms"]["fakeplug"]["execute"]["status"] == "ok"  # ran natively on the plugin's backend
        assert h["platforms"]["cpu"]["execute"]["status"] == "ok"
    envs = data["run"]["stats"]["worker_environments"]
    (plug,) = [e for e in envs.values() if e["device_kind"] == "fakeplug"]
    assert plug["platform"] == "fakeplug" and plug["pinned"] == {"JAX_PLATFORMS": "fakeplug"}
    assert plug["ray"]["resources"] == {"fakeplug_slot": 1.0}
    assert [d["backend"] for d in plug["devices"]] == ["fakeplug"]
    groups = {g["environment"]["device_kind"]: g for g in data["worker_environments"]}
    assert set(groups["fakeplug"]["platforms"]) == {"fakeplug"}
