"""Results grouped by the environment of the worker that produced them.

A sweep keeps each worker process's own environment under its label in
``run.stats["worker_environments"]`` (``"ray:<node>:<pid>"`` -> versions, jaxlib
revision, plugins, devices, driver and runtime versions, pinned backend); every outcome
row names the worker(s) that produced it (one per device kind, space-separated). These
pure functions join the two: which results came from which environment.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from farm.results import NATIVE_PLATFORM

#: Stages that run on the worker's own device: filed under the worker whose platform they name.
NATIVE_STAGES = ("compile", "execute", "compare", "xhost")
#: Stages that run on the CPU after a CPU execution: filed under the cpu worker.
CPU_STAGES = ("crossexec", "roundtrip")
#: Environment keys that say where, not what: workers that differ only in these are one environment.
PLACE_KEYS = ("host", "fingerprint", "ray")


def env_key(env: dict[str, Any] | None) -> str:
    """A short digest of what a worker's environment is (not where it ran); "" for none."""
    if not env:
        return ""
    what = {k: v for k, v in env.items() if k not in PLACE_KEYS}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:12]


def platform_of(env: dict[str, Any]) -> str:
    """The platform a worker ran natively: what it reported, else its device kind's default."""
    kind = env.get("device_kind") or "cpu"
    return env.get("platform") or NATIVE_PLATFORM.get(kind, kind)


def summary(env: dict[str, Any] | None) -> str:
    """One line: kind and platform, device model x count and memory, versions, driver, plugins, flags."""
    if not env:
        return "not recorded (results reused from earlier runs, or imported without worker environments)"
    parts = [f"{env.get('device_kind') or 'standalone'} -> {platform_of(env)}"]
    for d in env.get("devices") or []:
        mem = f", {d['memory_bytes'] / 2**30:.1f} GiB" if d.get("memory_bytes") else ""
        parts.append(f"{d.get('backend')}: {d.get('kind')} x{d.get('count')}{mem}")
    parts.append(f"jax {env.get('jax_version')} / jaxlib {env.get('jaxlib_version')}"
                 + (f" (rev {env['jaxlib_revision'][:10]})" if env.get("jaxlib_revision") else ""))
    accel = env.get("accelerator") or {}
    for key, label in (("nvidia_driver", "driver"), ("cuda_driver_api", "CUDA"), ("rocm_version", "ROCm")):
        if accel.get(key):
            parts.append(f"{label} {accel[key]}")
    if env.get("plugins"):
        parts.append("plugins " + ", ".join(f"{k} {v}" for k, v in env["plugins"].items()))
    parts.append(f"py {env.get('python')}")
    if env.get("xla_flags"):
        parts.append(f"XLA_FLAGS={env['xla_flags']}")
    if env.get("pinned"):
        parts.append(" ".join(f"{k}={v}" for k, v in env["pinned"].items()))
    return " · ".join(parts)


def producer(labels: list[str], platform: str | None, stage: str | None,
             worker_envs: dict[str, dict[str, Any]]) -> str:
    """Which of an outcome's workers produced a result of ``stage`` on ``platform``.

    A merged multi-kind outcome keeps the first kind's upstream records (trace, lower,
    export...), and each kind's own native records; crossexec and roundtrip run after the
    CPU execution. ``stage`` None: the whole outcome, filed under its first worker."""
    if not labels:
        return ""
    want = platform if stage in NATIVE_STAGES else "cpu" if stage in CPU_STAGES else None
    if want is not None:
        for label in labels:
            env = worker_envs.get(label)
            if env and platform_of(env) == want:
                return label
    return labels[0]


def group_results(worker_envs: dict[str, dict[str, Any]],
                  rows: Iterable[tuple[str, str | None, str | None, str, int]]) -> list[dict[str, Any]]:
    """Results by worker environment.

    Args:
        worker_envs: label -> that worker's environment (``run.stats["worker_environments"]``).
        rows: ``(outcome worker field, platform, stage, status, count)``; platform and stage
            None for whole outcomes (then status is the outcome's worst).

    Returns:
        One group per environment (``key`` "" for results whose worker left none: reused
        from a cache, imported), most results first: ``key``, ``environment``, ``summary``,
        ``workers`` (labels), ``hosts``, ``results``, ``statuses`` and ``platforms``
        (platform -> status -> count).
    """
    groups: dict[str, dict[str, Any]] = {}
    for worker, platform, stage, status, n in rows:
        labels = (worker or "").split()
        # a result: the worker that produced it; a whole outcome: each of its workers (one per kind)
        for label in [producer(labels, platform, stage, worker_envs)] if stage is not None else labels or [""]:
            _add(groups, worker_envs, label, platform, status, n)
    out = []
    for g in sorted(groups.values(), key=lambda g: (g["key"] == "", -g["results"], g["key"])):
        out.append({**g, "workers": sorted(g["workers"]), "hosts": sorted(g["hosts"]),
                    "statuses": dict(g["statuses"]), "platforms": {p: dict(c) for p, c in sorted(g["platforms"].items())}})
    return out


def _add(groups: dict[str, dict[str, Any]], worker_envs: dict[str, dict[str, Any]], label: str,
         platform: str | None, status: str, n: int) -> None:
    """Count ``n`` results of ``status`` under the environment of worker ``label``."""
    env = worker_envs.get(label)
    key = env_key(env)
    g = groups.get(key)
    if g is None:
        g = groups[key] = {"key": key, "environment": env, "summary": summary(env), "workers": set(),
                           "hosts": set(), "results": 0, "statuses": Counter(), "platforms": {}}
    g["workers"].add(label or "(none)")
    if env and env.get("host"):
        g["hosts"].add(env["host"])
    g["results"] += n
    g["statuses"][status] += n
    if platform is not None:
        g["platforms"].setdefault(platform, Counter())[status] += n
