"""Stages with teeth: planted faults must be caught with the right status, a clean run
must show none of them, and the compare functions must see what they claim to."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from farm import catalog
from farm.pipeline import Options, run_harness
from farm.stages.compare import compare_outputs, errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLANTED_SCRIPT = """
import json, sys
from farm import catalog, faults
from farm.pipeline import run_harness
faults.plant_from_env()
hs = catalog.select(catalog.Filters.parse(primitive=sys.argv[1], dtype=sys.argv[2]))
out = {}
for h in hs:
    o = run_harness(h)
    out[h.name] = {f"{r.stage}/{r.platform}": r.status for r in o.records}
print(json.dumps(out))
"""


def run_planted(plant: str, primitives: str, dtypes: str = "float32") -> dict[str, dict[str, str]]:
    env = {**os.environ, "FARM_PLANT": plant, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-c", PLANTED_SCRIPT, primitives, dtypes], env=env, capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def not_ok(statuses: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in statuses.items() if v != "ok"}


def test_clean_run_has_no_findings() -> None:
    hs = catalog.select(catalog.Filters.parse(primitive="sin,exp,add,tanh", dtype="float32,int32"))
    assert hs
    for h in hs:
        out = run_harness(h)
        assert not [r for r in out.records if r.status != "ok"], h.name


def test_wrong_lowering_rule_on_one_platform_is_caught_by_crossexec() -> None:
    res = run_planted("wrong_lowering:sin:tpu", "sin,cos")
    assert not_ok(res["sin_float32_3x4"]) == {"crossexec/tpu": "fail"}
    assert not_ok(res["cos_float32_3x4"]) == {}


def test_wrong_cpu_lowering_is_caught_against_the_reference() -> None:
    res = run_planted("wrong_lowering:exp:cpu", "exp")
    bad = not_ok(res["exp_float32_3x4"])
    assert bad["compare/cpu"] == "fail"
    # the other platforms' modules still compute exp: on CPU they now disagree with the CPU module
    assert bad["crossexec/tpu"] == "fail"


def test_dropped_dtype_is_a_lowering_error_for_that_dtype_only() -> None:
    res = run_planted("drop_dtype:exp:float16", "exp", "float16,float32")
    assert not_ok(res["exp_float32_3x4"]) == {}
    bad = not_ok(res["exp_float16_3x4"])
    assert {k: v for k, v in bad.items() if k.startswith("lower/")} == {
        f"lower/{p}": "error" for p in ("cpu", "cuda", "rocm", "tpu")}
    assert bad["compare/cpu"] == "skipped"


def test_chlo_leak_is_a_census_failure() -> None:
    res = run_planted("chlo_leak:tanh:cuda", "tanh")
    bad = not_ok(res["tanh_float32_3x4"])
    assert bad["census/cuda"] == "fail"
    assert "census/cpu" not in bad


def test_stale_limitation_is_unexpected_pass() -> None:
    h = catalog.define("test", "sin", __import__("jax").lax.sin, [catalog.RandArg((3,), "float32")],
                       dtype="float32", catalog="test_stale", reference=np.sin,
                       limitations=[catalog.Limitation("claims tpu cannot lower sin", platforms=("tpu",))])
    out = run_harness(h, Options(platforms=("cpu", "tpu")))
    statuses = {(r.stage, r.platform): r.status for r in out.records}
    assert statuses[("lower", "tpu")] == "unexpected_pass"
    assert statuses[("lower", "cpu")] == "ok"


def test_errors_exact_and_tolerant() -> None:
    a = np.array([1, 2, 3], np.int32)
    assert errors(a, np.array([1, 2, 3]), 0, 0)["mismatches"] == 0
    assert errors(a, np.array([1, 2, 4]), 0, 0)["mismatches"] == 1
    f = np.array([1.0, np.nan, np.inf], np.float32)
    assert errors(f, np.array([1.0, np.nan, np.inf]), 1e-6, 0)["mismatches"] == 0
    m = errors(np.array([1.001], np.float32), np.array([1.0]), 1e-5, 0)
    assert m["mismatches"] == 1 and m["max_rel_err"] == pytest.approx(1e-3, rel=1e-2)
    assert m["max_ulp_err"] > 1000


def test_output_dtype_must_match_what_tracing_promised() -> None:
    status, err, _ = compare_outputs([np.ones(3, np.float32)], [np.ones(3)], 1e-5, 0, False,
                                     promised=[{"dtype": "float16", "shape": [3]}])
    assert status == "fail" and "float16" in err
