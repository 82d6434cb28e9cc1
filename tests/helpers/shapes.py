"""A database made by real sweeps at static and symbolic shapes, as the dashboard's shape
tests read it (tests/test_dashboard_shapes.py, the browser test): `farm sweep --shapes
static,symbolic` of sin and cumsum (float32), with sin's lowering planted wrong only for
symbolic shapes on tpu (``FARM_PLANT=symbolic_only:sin:tpu``), so the static run stays clean
and the symbolic calls on tpu fail."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLANT = "symbolic_only:sin:tpu"
RUN = "shapes"


def sweep(url: str, name: str, plant: str | None, shapes: str = "static,symbolic",
          primitives: str = "sin,cumsum") -> None:
    """``farm sweep`` in its own process (its own local Ray cluster, whose workers inherit
    ``FARM_PLANT``), as a user runs it."""
    env = {k: v for k, v in os.environ.items() if k != "FARM_PLANT"} | {"PYTHONPATH": str(ROOT),
                                                                        "RAY_USAGE_STATS_ENABLED": "0"}
    if plant:
        env["FARM_PLANT"] = plant
    p = subprocess.run([sys.executable, "-m", "farm", "sweep", "--primitive", primitives, "--dtype", "float32",
                        "--shapes", shapes, "--repeats", "1", "--workers", "2", "--force", "--name", name, "--db", url],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-4000:]  # 1: the sweep found failures


def make_shapes_db(path: str) -> dict[str, Any]:
    """One planted run (``RUN``) in a SQLite file; the URL and the harnesses' fingerprints."""
    from sqlalchemy import select

    from farm.store import open_store
    from farm.store.models import HarnessRow

    url = f"sqlite:///{path}"
    sweep(url, RUN, PLANT)
    store = open_store(url)
    try:
        with store.session() as s:
            fps = dict(s.execute(select(HarnessRow.name, HarnessRow.fingerprint)).tuples().all())
    finally:
        store.dispose()
    sin = next(n for n in fps if n.startswith("sin_float32"))
    return {"url": url, "fp": fps, "sin": fps[sin], "sin_name": sin,
            "cumsum": next(fp for n, fp in fps.items() if n.startswith("cumsum_float32"))}
