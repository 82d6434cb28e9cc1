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


def farm_commit() -> str:
    root = Path(__file__).resolve().parents[2]
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

    return {
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "device_kinds": sorted(device_kinds if device_kinds is not None else local_device_kinds()),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "farm_commit": farm_commit(),
    }


def fingerprint(env: dict[str, Any]) -> str:
    """What makes results comparable: versions, devices and flags (not the host name)."""
    keys = ("jax_version", "jaxlib_version", "python", "device_kinds", "xla_flags")
    return hashlib.sha256(json.dumps({k: env.get(k) for k in keys}, sort_keys=True).encode()).hexdigest()[:32]
