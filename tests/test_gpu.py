"""Native GPU path: the same stage code compiling and running the cuda module on a GPU.

Skipped cleanly (one reason) on hosts without an NVIDIA GPU, which includes CI."""
from __future__ import annotations

import pytest


def _gpu() -> bool:
    try:
        import jax

        return bool(jax.devices("gpu"))
    except Exception:
        return False


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _gpu(), reason="no NVIDIA GPU on this host")]


def test_native_cuda_matches_reference_and_cpu_artifact() -> None:
    from farm import catalog
    from farm.pipeline import Options, run_harness

    hs = catalog.select(catalog.Filters.parse(primitive="exp,sin,add,mul", dtype="float32,float16"))
    for h in hs:
        out = run_harness(h, Options(platforms=("cpu", "cuda"), run_on=("gpu",)))
        st = {(r.stage, r.platform): r.status for r in out.records}
        assert st[("compile", "cuda")] == "ok" and st[("compare", "cuda")] == "ok", (h.name, st)
