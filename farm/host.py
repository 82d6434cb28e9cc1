"""The environment a worker measures in: versions, host, devices, flags, farm commit.

Free of database imports: standalone workers on device hosts (no SQLAlchemy, no Ray)
describe themselves with it too.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from farm.platforms import PIN_VARS


def farm_commit() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def describe(device_kinds: list[str] | None = None) -> dict[str, Any]:
    """This process's environment (imports jax)."""
    import jax
    import jaxlib

    from farm.platforms import local_device_kinds

    env = {
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "device_kinds": sorted(device_kinds if device_kinds is not None else local_device_kinds()),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "farm_commit": farm_commit(),
        **({"jax_config": config} if (config := jax_config()) else {}),
    }
    # Facts that say where a worker ran but do not change the fingerprint (``fingerprint``
    # reads named keys only): the jaxlib revision, plugin packages, the pinned backend.
    if rev := jaxlib_revision():
        env["jaxlib_revision"] = rev
    if plugins := plugin_packages():
        env["plugins"] = plugins
    if pinned := {v: os.environ[v] for v in PIN_VARS if os.environ.get(v)}:
        env["pinned"] = pinned
    if device_kinds is None:  # a worker describing itself: its devices (the driver may have none)
        env["devices"] = devices()
        if accel := accelerator_stack():
            env["accelerator"] = accel
    return env


def jaxlib_revision() -> str:
    """The git revision jaxlib was built from, where its build recorded one."""
    try:
        from jaxlib import version

        return str(getattr(version, "_git_hash", "") or "")
    except Exception:
        return ""


def plugin_packages() -> dict[str, str]:
    """Installed PJRT plugins and accelerator runtimes (``jax-cuda12-plugin``, ``libtpu``...), by version."""
    from importlib import metadata

    out = {}
    for d in metadata.distributions():
        name = (d.metadata["Name"] or "").lower()
        if name.startswith(("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm", "libtpu", "jax-metal")) or "pjrt" in name:
            out[name] = d.version
    return dict(sorted(out.items()))


def devices() -> list[dict[str, Any]]:
    """Per backend that initialises here (cpu, gpu, tpu, PJRT plugins): its platform as the
    backend reports it (cuda or rocm for a gpu), the PJRT client's version string, the
    device kind (model), count, and memory per device (``bytes_limit`` of the allocator
    where the backend says; the host's memory for cpu)."""
    import jax

    from farm.platforms import platform_of, plugin_platforms

    out = []
    for backend in ("cpu", "gpu", "tpu", *plugin_platforms()):
        try:
            ds = jax.devices(backend)
        except (RuntimeError, AssertionError):
            continue
        if not ds:
            continue
        client = getattr(ds[0], "client", None)
        version = str(getattr(client, "platform_version", "") or "")
        d = {"backend": backend, "platform": platform_of(ds[0].platform, str(getattr(client, "platform", "") or ""),
                                                         version),
             "kind": ds[0].device_kind, "count": len(ds), "platform_version": " ".join(version.split())[:200]}
        if mem := _device_memory(ds[0]) or (_host_memory() if backend == "cpu" else 0):
            d["memory_bytes"] = mem
        out.append(d)
    return out


def _device_memory(device: Any) -> int:
    """The memory one device offers (0: the backend does not say; CPU's says nothing)."""
    try:
        stats = device.memory_stats() or {}
    except Exception:  # not every backend implements it
        return 0
    return int(stats.get("bytes_limit") or stats.get("bytes_reservable_limit") or 0)


def _host_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def accelerator_stack() -> dict[str, Any]:
    """Driver and runtime versions of this host's accelerators, where present; nothing
    (an empty dict) on a host without them. NVIDIA: the kernel driver
    (``/proc/driver/nvidia/version``), and from ``nvidia-smi`` the driver, the CUDA version
    it supports and each GPU's name and memory; the CUDA runtime jax loaded comes from the
    PJRT client's version (``devices()``). ROCm: ``/opt/rocm/.info/version``. TPU:
    ``libtpu``'s version is in ``plugins``."""
    out: dict[str, Any] = {}
    try:
        with open("/proc/driver/nvidia/version") as f:
            out["nvidia_kernel_module"] = " ".join(f.readline().split())[:200]
    except OSError:
        pass
    if smi := _nvidia_smi():
        out.update(smi)
    for path in ("/opt/rocm/.info/version", "/opt/rocm/.info/version-dev"):
        try:
            with open(path) as f:
                out["rocm_version"] = f.read().strip()[:64]
            break
        except OSError:
            continue
    return out


def _nvidia_smi() -> dict[str, Any]:
    """What ``nvidia-smi`` says (nothing where it is absent or fails)."""
    import shutil

    if not shutil.which("nvidia-smi"):
        return {}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    gpus = [[c.strip() for c in line.split(",")] for line in q.stdout.splitlines() if line.count(",") == 2]
    out: dict[str, Any] = {}
    if gpus:
        out["nvidia_driver"] = gpus[0][2]
        out["gpus"] = [{"name": g[0], "memory": g[1]} for g in gpus]
    if (i := head.find("CUDA Version:")) >= 0:
        out["cuda_driver_api"] = head[i + len("CUDA Version:"):].split()[0]
    return out


#: JAX settings a configuration sweep sets (``farm.run.configs``): results under different
#: ones are not comparable.
CONFIG_VARS = ("JAX_ENABLE_X64", "JAX_USE_SHARDY_PARTITIONER", "JAX_DEFAULT_MATMUL_PRECISION")


def jax_config() -> dict[str, str]:
    """The configuration variables set in this process's environment."""
    return {v: os.environ[v] for v in CONFIG_VARS if os.environ.get(v)}


def fingerprint(env: dict[str, Any]) -> str:
    """What makes results comparable: versions, devices and flags (not the host name)."""
    keys = ("jax_version", "jaxlib_version", "python", "device_kinds", "xla_flags")
    parts = {k: env.get(k) for k in keys}
    if env.get("jax_config"):  # only when set: runs without a configuration keep their fingerprints
        parts["jax_config"] = env["jax_config"]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]
