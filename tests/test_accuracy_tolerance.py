"""The tolerance follows the accuracy table: a primitive computed at a lower precision than
its dtype (planted: float16 exp through bfloat16, float32 sin through float16) passes the
compare stage clean and fails it planted, on the farm's catalog (hand-written references)
and on JAX's own (the float64 jaxpr reference)."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np

from farm.catalog import ulps
from farm.cache import key as cachekey
T = importlib.import_module("farm.judge.tolerance")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANT = "low_precision:exp:float16:bfloat16,low_precision:sin:float32:float16"

SCRIPT = """
import json, sys
from farm import catalog
from farm import faults
from farm.pipeline import run_harness
faults.plant_from_env()
out = {}
for cat in ("farm", "upstream"):
    for prim, dt in (("exp", "float16"), ("sin", "float32")):
        for h in catalog.select(catalog.Filters.parse(catalog=cat, primitive=prim, dtype=dt)):
            if h.group in ("special_values",):
                continue
            recs = {f"{r.stage}/{r.platform}": r.status for r in run_harness(h).records}
            out[f"{cat}:{h.name}"] = recs.get("compare/cpu")
print(json.dumps(out))
"""


def _compare(plant: str) -> dict[str, str]:
    env = {**os.environ, "FARM_PLANT": plant, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_lower_precision_primitive_fails_compare_on_both_catalogs() -> None:
    clean, planted = _compare(""), _compare(PLANT)
    assert {k.split(":")[0] for k in clean} == {"farm", "upstream"}
    assert len(clean) >= 4, clean
    for name, status in clean.items():
        assert status == "ok", (name, status)
        assert planted[name] == "fail", (name, planted[name])


def test_the_old_flat_band_would_not_have_seen_it() -> None:
    """8 epsilons of float16 (the old elementwise band) is wider than bfloat16's rounding."""
    x = np.linspace(0.1, 3.0, 64)
    ref = np.exp(x.astype(np.float16).astype(np.float64))
    low = np.exp(x.astype(np.float16).astype(ml_dtypes.bfloat16).astype(np.float32)).astype(ml_dtypes.bfloat16)
    low = low.astype(np.float16)
    eps = float(np.finfo(np.float16).eps)
    old_ok = np.abs(low - ref) <= 8 * eps + 8 * eps * np.abs(ref)
    assert old_ok.all()
    assert T.mismatches(ref, low, T.Computation(np.float16, "elementwise", frozenset({"exp"}))) > 0


def test_elementwise_bounds_come_from_the_table() -> None:
    assert T.elementwise_ulps(np.float16, {"exp"}) == ulps.bound("exp", "float16")
    assert T.elementwise_ulps(np.float64, {"log1p"}) == ulps.bound("log1p", "float64") > 8
    assert T.elementwise_ulps(np.float32, {"add"}) == ulps.DEFAULT
    sin = T.allowed(T.Computation(np.float32, "elementwise", frozenset({"sin"})))
    tiny = float(np.finfo(np.float32).tiny)  # a single primitive: no absolute band beyond the smallest normal
    assert sin.atol == tiny and sin.rtol == ulps.bound("sin", "float32") * float(np.finfo(np.float32).eps)
    both = T.allowed(T.Computation(np.float32, "elementwise", frozenset({"sin", "mul"})))
    assert both.atol > tiny  # a composite keeps an absolute band
    exp16 = T.Computation(np.float16, "elementwise", frozenset({"exp"}))
    assert T.policy(exp16)["ulps"] == ulps.bound("exp", "float16")


def test_the_bounds_file_is_part_of_the_result_cache_key() -> None:
    """A changed bounds table changes verdicts: no cached verdict may survive it."""
    assert ulps.PATH in cachekey.farm_code_files()
