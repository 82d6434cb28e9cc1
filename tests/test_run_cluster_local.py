"""The local default cluster: ``farm sweep`` without ``--address`` (and every test that
starts Ray) starts its own cluster, whatever a killed Ray head left behind."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def stale_ray_tmp():  # noqa: ANN201
    """A Ray temp dir (RAY_TMPDIR; short: Ray's unix sockets live under it) whose
    ``ray/ray_current_cluster`` names a head that is gone, as a killed ``ray start --head`` leaves it."""
    base = tempfile.mkdtemp(prefix="rs", dir="/tmp")
    os.makedirs(os.path.join(base, "ray"))
    with open(os.path.join(base, "ray", "ray_current_cluster"), "w") as f:
        f.write(f"127.0.0.1:{_dead_port()}")
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _env(tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return {**env, "RAY_TMPDIR": tmp, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": ROOT}


#: The idle Python workers of a local cluster after it started (children of its raylet).
_IDLE = ("import os, time\ntime.sleep(2)\n"
         "raylet = ray._private.worker.global_worker.node.all_processes['raylet'][0].process.pid\n"
         "def ppid(p):\n"
         "    with open(f'/proc/{p}/stat') as f:\n"
         "        return int(f.read().rsplit(')', 1)[1].split()[1])\n"
         "def cmd(p):\n"
         "    with open(f'/proc/{p}/cmdline') as f:\n"
         "        return f.read()\n"
         "idle = 0\n"
         "for p in filter(str.isdigit, os.listdir('/proc')):\n"
         "    try:\n"
         "        idle += ppid(p) == raylet and cmd(p).startswith('ray::IDLE')\n"
         "    except OSError:\n"
         "        pass\n"
         "print('IDLE', idle)\n"
         "@ray.remote(num_cpus=0)\ndef one():\n    return 1\n"
         "print('TASK', ray.get(one.remote()))\n")


def test_local_cluster_ignores_a_stale_current_cluster_file(stale_ray_tmp) -> None:  # noqa: ANN001
    """... and starts no idle workers ahead of need: the farm's workers are actors with an
    environment of their own, which a prestarted process never serves (1.8 CPU-s of a cluster's
    start on this host); a task still gets a worker when it asks."""
    code = ("import ray\nfrom farm.run.cluster import ray_init\n"
            "c = ray_init(None, 1)\nprint('SLOTS', c.slots, int(ray.cluster_resources()['cpu_slot']))\n"
            + _IDLE + "ray.shutdown()\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(stale_ray_tmp), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "SLOTS 1 1" in r.stdout
    assert "IDLE 0" in r.stdout and "TASK 1" in r.stdout, r.stdout
    # the stale file is left alone (it is not ours to remove)
    assert os.path.exists(os.path.join(stale_ray_tmp, "ray", "ray_current_cluster"))


def test_farm_sweep_without_address_ignores_a_stale_current_cluster_file(stale_ray_tmp, tmp_path) -> None:  # noqa: ANN001
    farm = [sys.executable, "-m", "farm"]
    db = f"sqlite:///{tmp_path / 'farm.db'}"
    r = subprocess.run(farm + ["sweep", "--db", db, "--primitive", "sin", "--dtype", "float32", "--workers", "1",
                               "--platforms", "cpu", "--name", "stale"],
                       cwd=ROOT, env=_env(stale_ray_tmp), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
