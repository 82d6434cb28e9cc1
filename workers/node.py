"""What a cluster node runs to join: `ray start` with Ray's own accelerator resources.

A cpu worker needs a ``cpu_slot`` (so a head node with CPUs runs no harness unless it
says so); a gpu worker requests a fraction of Ray's ``GPU`` and a tpu worker Ray's ``TPU``,
so a node started with plain ``ray start --num-gpus N`` (or a KubeRay GPU pod) serves the
farm too: ``farm worker`` is only a convenience that starts such a node.
"""
from __future__ import annotations

import json
import os


def node_resources(slots: int | None, tags: list[str], plugins: dict[str, int] | None = None) -> dict[str, int]:
    """The custom resources: ``cpu_slot`` (default: the cores), ``TPU`` for a ``tpu`` tag
    (Ray detects real TPUs itself), and ``<platform>_slot`` per PJRT plugin platform with
    devices here (``plugins``: platform -> devices; Ray has no resource of its own for them)."""
    n = slots or os.cpu_count() or 1
    res = {"cpu_slot": n}
    if "tpu" in tags:
        res["TPU"] = 1
    for tag in tags:  # a plugin platform's tag, advertised without the device (tests only)
        if tag not in ("cpu", "gpu", "tpu"):
            res[f"{tag}_slot"] = 1
    for platform, count in sorted((plugins or {}).items()):
        res[f"{platform}_slot"] = count
    return res


def local_plugins() -> dict[str, int]:
    """PJRT plugin platforms with devices on this node, and how many (imports jax)."""
    from workers.runtime import configure_process

    configure_process()
    import jax

    from farm.platforms import plugin_platforms

    out = {}
    for p in plugin_platforms():
        try:
            if n := len(jax.devices(p)):
                out[p] = n
        except (RuntimeError, AssertionError):
            continue
    return out


def local_gpus() -> int:
    """The GPUs jax sees on this node (imports jax; 0 without a GPU backend)."""
    from workers.runtime import configure_process

    configure_process()
    import jax

    try:
        return len(jax.devices("gpu"))
    except (RuntimeError, AssertionError):
        return 0


def node_command(address: str, slots: int | None, tags: list[str], num_gpus: int | None = None) -> list[str]:
    """``ray start`` for this node; ``num_gpus`` None: the GPUs (and PJRT plugin devices) jax
    finds (a ``gpu`` tag: at least 1)."""
    plugins_wanted = num_gpus is None
    if num_gpus is None:
        num_gpus = max(local_gpus(), 1 if "gpu" in tags else 0)
    plugins = local_plugins() if plugins_wanted else {}
    cmd = ["ray", "start", f"--address={address}", f"--resources={json.dumps(node_resources(slots, tags, plugins))}"]
    if num_gpus:
        cmd.append(f"--num-gpus={num_gpus}")
    return cmd + ["--disable-usage-stats", "--block"]
