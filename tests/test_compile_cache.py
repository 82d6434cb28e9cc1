"""JAX's persistent compilation cache, which `./dev test` turns on for the suite and Bazel's
family tests (never for `farm sweep`): it cannot hide a change. An entry is reused only for
the same module under the same XLA flags; an edited function or other flags compile again,
and a reused executable gives what a fresh compile gives."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import jax, jax.numpy as jnp, numpy as np
f = jax.jit(lambda x: jnp.sin(x) * {k} + jnp.float32(0.1) / 3)
print(repr(np.asarray(f(np.linspace(0, 1, 8, dtype=np.float32))).tolist()))
"""


def _run(cache: Path, k: int = 2, flags: str = "") -> str:
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(cache), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}
    p = subprocess.run([sys.executable, "-c", PROGRAM.format(k=k)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip()


def _entries(cache: Path) -> set[str]:
    return {f.name for f in cache.iterdir() if f.name.endswith("-cache")}


def test_an_entry_is_reused_only_for_the_same_module_under_the_same_flags(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run(cache)
    one = _entries(cache)
    assert len(one) == 1  # written: the suite's processes do reuse compiles
    assert _run(cache) == first and _entries(cache) == one  # the same module and flags: reused, same values
    edited = _run(cache, k=3)
    assert edited != first and len(_entries(cache)) == 2  # an edited function is another module
    flagged = _run(cache, flags="--xla_cpu_enable_fast_math=true")
    assert len(_entries(cache)) == 3  # other XLA flags: compiled again, never the entry of the default flags
    assert flagged.count(",") == first.count(",")
    uncached = subprocess.run([sys.executable, "-c", PROGRAM.format(k=2)], capture_output=True, text=True, timeout=120,
                              env={k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT")
                                   and k != "JAX_COMPILATION_CACHE_DIR"} | {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""})
    assert uncached.stdout.strip() == first  # a reused executable computes what a fresh compile does
