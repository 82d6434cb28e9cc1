"""The determinism check (``--check-determinism``, ``farm.pipeline.determinism``): a lowering rule
that keeps state between two exports in one process is caught by the fresh process; the same
harnesses without the plant flag nothing; what a fresh process cannot make is said, not hidden."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from jax import lax

from farm import catalog
from farm.pipeline import run_harness
from farm.pipeline.determinism import sampled
from farm.results import DETERMINISM_SAMPLE, Options
from tests.helpers.fresh import ROOT, run_json


#: Three sin harnesses in one process, each checked: under ``stateful:sin`` the first is made right
#: in the worker, the later ones wrong (its rule lowered before), and a fresh process makes them right.
SCRIPT = """
import json
from farm.faults import plant_from_env
plant_from_env()
from farm import catalog
from farm.pipeline import run_harness
from farm.results import Options
hs = [catalog.select(catalog.Filters.parse(primitive="sin", dtype=d))[0] for d in ("bfloat16", "float16", "float32")]
out = {}
for h in hs:
    r = next(r for r in run_harness(h, Options(determinism="all", repeats=1)).records if r.stage == "determinism")
    out[h.dtype] = [r.status, r.error, r.facts.get("compared"), r.facts.get("differs"), sorted(r.facts.get("texts") or {})]
print(json.dumps(out))
"""


def test_a_rule_that_keeps_state_between_exports_is_caught_by_the_fresh_process_and_nothing_without_it() -> None:
    planted = run_json(SCRIPT, "stateful:sin")
    first, *later = planted.values()
    assert first[0] == "ok" and first[2] == ["again", "fresh"]  # the first lowering in the process is right
    for status, error, compared, differs, texts in later:
        assert status == "fail" and "depends on the process" in error
        assert set(differs) == {"fresh"} and {"cpu", "tpu"} <= set(differs["fresh"])
        assert "fresh:cpu" in texts  # both module texts of what differs are kept
    clean = run_json(SCRIPT)
    assert {d: v[0] for d, v in clean.items()} == {"bfloat16": "ok", "float16": "ok", "float32": "ok"}
    assert all(v[2] == ["again", "fresh"] and v[3] == {} for v in clean.values())


def test_a_harness_a_fresh_process_cannot_load_is_compared_in_the_worker_and_says_why() -> None:
    h = catalog.define("test_only", "sin", lax.sin, [catalog.RandArg((4,), "float32")], dtype="float32",
                       catalog="test_only", reference=np.sin)
    rec = next(r for r in run_harness(h, Options(determinism="all", repeats=1, platforms=("cpu", "tpu"))).records
               if r.stage == "determinism")
    assert rec.status == "ok" and rec.facts["compared"] == ["again"]
    assert "cannot load the 'test_only' catalog" in rec.facts["fresh"]


def test_off_by_default_and_a_sample_is_stable_and_about_one_in_the_sample_size() -> None:
    hs = catalog.load()
    h = hs[0]
    assert all(r.stage != "determinism" for r in run_harness(h, Options(repeats=1, platforms=("cpu",))).records)
    picked = [x for x in hs if sampled(x, "sample")]
    assert picked == [x for x in hs if sampled(x, "sample")]  # by fingerprint: the same on every run
    assert 0.5 < len(picked) * DETERMINISM_SAMPLE / len(hs) < 2.0
    assert all(sampled(x, "all") for x in hs[:10]) and not any(sampled(x, "off") for x in hs)
    # at its default the option leaves a run's options and result keys as they were
    assert "determinism" not in Options().to_dict() and "determinism" not in Options().key_fields()
    assert Options(determinism="sample").to_dict()["determinism"] == "sample"
    with pytest.raises(ValueError, match="determinism"):
        Options(determinism="often")


def test_the_flag_is_checked_and_kept_in_a_request() -> None:
    from farm.run.request import SweepRequest

    req = SweepRequest(determinism="all")
    assert "--check-determinism" in req.to_argv() and SweepRequest.from_argv(req.to_argv()) == req
    res = subprocess.run([sys.executable, "-m", "farm", "sweep", "--check-determinism", "often", "--db",
                          "sqlite:///:memory:"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.strip().splitlines()[-1] == \
        "farm: error: --check-determinism often: one of sample, all"
