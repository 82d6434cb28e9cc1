"""The upstream catalog adapter: counts, keys, limitations, seeded inputs and the cache."""
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from farm import catalog
from farm.catalog import known, upstream

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hs() -> list[catalog.Harness]:
    return catalog.load("upstream")


def test_counts(hs) -> None:
    mod = upstream.upstream_module()
    assert len(hs) == len(mod.all_harnesses)  # every upstream harness loads (5,594 with x64 off)
    assert len({h.group for h in hs}) == len({h.group_name for h in mod.all_harnesses})
    assert all(h.catalog == "upstream" and h.compare == "none" and h.reference is None for h in hs)
    assert len({h.source for h in hs}) == len(hs)
    assert len({h.name for h in hs}) == len(hs)
    assert len({h.fingerprint for h in hs}) == len(hs)


def test_limitations_map_devices_and_stages(hs) -> None:
    by_source = {h.source: h for h in hs}
    mod = upstream.upstream_module()
    checked = Counter()
    for uh in mod.all_harnesses:
        for lim in uh.jax_unimplemented:
            if not lim.filter(dtype=uh.dtype):
                continue
            h = by_source[uh.fullname]
            ours = [l for l in h.limitations if l.description == f"upstream: {lim.description}"]
            if known.stale_upstream(h.group, h.name, f"upstream: {lim.description}"):
                assert not ours, uh.fullname  # checked stale on this jax: dropped (farm/catalog/known.py)
                checked["stale"] += 1
                continue
            assert ours, uh.fullname
            devices = (lim.devices,) if isinstance(lim.devices, str) else tuple(lim.devices)
            want = {p for d in devices for p in upstream.PLATFORMS_OF_DEVICE[d]}
            assert any(set(l.platforms) == want for l in ours)
            assert all(l.stage == "run" for l in ours)  # unimplemented on the device: fails somewhere on it
            checked[lim.skip_run] += 1
    assert checked[True] and checked[False] and checked["stale"]


def test_inputs_seeded_from_fingerprint(hs) -> None:
    h = next(h for h in hs if h.group == "cholesky")
    a, b = h.make_args(), h.make_args()
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    mod_h = upstream._upstream_harness(h.source)
    want = mod_h.dyn_args_maker(np.random.RandomState(int(h.fingerprint[:8], 16)))
    assert all(np.array_equal(x, y) for x, y in zip(a, want))


def test_runs_through_the_pipeline(hs) -> None:
    from farm.pipeline import run_harness
    from farm.results import Options

    h = next(h for h in hs if h.group == "sin" and h.dtype == "float32")
    out = run_harness(h, Options(platforms=("cpu", "tpu"), repeats=1))
    assert out.worst == "ok", [(r.stage, r.status, r.error) for r in out.records]


def test_select_uses_cache_instead_of_importing_jaxs_catalog(tmp_path) -> None:
    """The second selection reads the cached entries and never imports JAX's catalog module
    (what costs the time; the speed itself is `farm bench`'s catalog figure, not a test's)."""
    code = ("import sys, json; from farm import catalog; "
            "hs=catalog.select(catalog.Filters(catalog='upstream')); "
            "print(json.dumps([len(hs), len({h.group for h in hs}), "
            "'jax._src.internal_test_util.test_harnesses' in sys.modules, "
            "sorted(h.fingerprint for h in hs)[:50]]))")
    env = {"FARM_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                      cwd=ROOT, env=env).stdout.strip().splitlines()[-1]) for _ in range(2)]
    (cold_n, cold_g, cold_imported, cold_fp), (warm_n, warm_g, warm_imported, warm_fp) = runs
    assert list(tmp_path.glob("upstream-*.json"))
    assert (cold_n, cold_g, cold_fp) == (warm_n, warm_g, warm_fp)  # same harnesses, same fingerprints
    assert cold_imported and not warm_imported
