"""A snippet of Python run in a fresh interpreter, for what one process cannot show twice
(a plant in force from the start, a clean jax trace cache)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_json(code: str, plant: str | None = None) -> Any:
    """``code`` in a fresh interpreter (under ``FARM_PLANT=plant`` where given, never an
    inherited one); the JSON its last line prints."""
    env = {k: v for k, v in os.environ.items() if k != "FARM_PLANT"} | {"PYTHONPATH": str(ROOT)}
    if plant:
        env["FARM_PLANT"] = plant
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])
