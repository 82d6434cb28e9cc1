"""Planted faults (``farm.faults``) stay out of production: a worker loads the planting
code only where ``FARM_PLANT`` is set."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
from workers.runtime import JobRunner
from farm import catalog
from farm.pipeline import run_harness
runner = JobRunner("farm", [], {"platforms": ["cpu"], "crossexec": False, "repeats": 1})
[h] = [h for h in catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))][:1]
run_harness(h, runner.options)
print(json.dumps({"planted": runner.planted, "loaded": "farm.faults.planted" in sys.modules}))
"""


def _worker(**env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "FARM_PLANT"} | {"PYTHONPATH": str(ROOT), **env}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environ, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_worker_without_farm_plant_never_loads_the_planting_code() -> None:
    assert _worker() == {"planted": [], "loaded": False}


def test_a_worker_with_farm_plant_plants_its_faults() -> None:
    assert _worker(FARM_PLANT="wrong_lowering:sin:cpu") == {"planted": ["wrong_lowering:sin:cpu"], "loaded": True}
