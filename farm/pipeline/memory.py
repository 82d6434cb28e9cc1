"""What a long-lived worker uses to keep its memory bounded: its resident size, and a way
to drop JAX's caches and ours."""
from __future__ import annotations

import os

from farm.pipeline.compile_cache import CACHE
from farm.stages.compile import clear_checked


def clear_caches() -> None:
    """Drop JAX's and our caches so a long-lived worker keeps bounded memory."""
    import jax  # here, not at top: see farm.pipeline (the store imports this package)

    CACHE.clear()
    clear_checked()
    jax.clear_caches()


def rss_bytes() -> int:
    """This process's resident set size (0 where /proc is not there)."""
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
