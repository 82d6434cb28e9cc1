"""Configurations share compile, execute and compare where they make the same module
from the same inputs, and only there: ``farm sweep --config x64=off,on`` over three
harnesses, one whose module x64 leaves alone, one whose module it changes (an ``arange``
is int32 or int64) and one whose inputs it changes. Lowered for cpu and tpu: the
multi-platform export differs between the two (its platform index is i32 or i64), and
only the round trip, off by default, runs it."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

MODULE = '''
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from farm.catalog import CustomArg, RandArg, define


def _shifted(rng):
    """Inputs that depend on the configuration (a catalog built differently with x64 on)."""
    return (rng.standard_normal(3) + (1.0 if jax.config.jax_enable_x64 else 0.0)).astype(np.float32)


define("x64reuse", "sin", lax.sin, [RandArg((3,), "float32")], dtype="float32", group="same_module",
       catalog="x64reuse", reference=np.sin)
define("x64reuse", "add", lambda x: x + jnp.arange(3), [RandArg((3,), "float32")], dtype="float32",
       group="module_differs", catalog="x64reuse", reference=lambda x: x + np.arange(3, dtype=np.float32))
define("x64reuse", "sin", lax.sin, [CustomArg("shifted", _shifted, (3,), "float32")], dtype="float32",
       group="inputs_differ", catalog="x64reuse", reference=np.sin)
'''


def _stages(db: Path, run: str) -> dict[str, dict[str, tuple[str, int | None, str | None]]]:
    """harness -> stage/platform -> (status, reused_from, module sha256)."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT h.name, r.stage || '/' || r.platform, r.status, r.facts FROM results r "
                           "JOIN runs ON runs.id = r.run_id JOIN harnesses h ON h.id = r.harness_id "
                           "WHERE runs.name = ?", (run,)).fetchall()
    finally:
        con.close()
    out: dict[str, dict[str, tuple[str, int | None, str | None]]] = {}
    for name, key, status, facts in rows:
        f = json.loads(facts) if isinstance(facts, str) else (facts or {})
        out.setdefault(name, {})[key] = (status, f.get("reused_from"), f.get("module_sha256"))
    return out


@pytest.mark.slow(reason="x64 off and on sweeps, each a fresh process")
def test_x64_off_and_on_share_downstream_results_only_where_module_and_inputs_are_the_same(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "farm_test_x64reuse.py").write_text(MODULE)
    db = tmp_path / "farm.db"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "RAY_USAGE_STATS_ENABLED": "0"}
    p = subprocess.run([sys.executable, "-m", "farm", "sweep", "--config", "x64=off,on", "--catalog", "x64reuse",
                        "--modules", "farm_test_x64reuse", "--db", f"sqlite:///{db}", "--name", "cfg",
                        "--platforms", "cpu,tpu", "--repeats", "1", "--workers", "1"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "0 reused whole" in p.stderr.split("configuration x64=on")[1]  # the Python side differs: no whole outcome
    off, on = _stages(db, "cfg@x64=off"), _stages(db, "cfg@x64=on")
    con = sqlite3.connect(db)
    (off_id,) = con.execute("SELECT id FROM runs WHERE name = 'cfg@x64=off'").fetchone()
    con.close()
    same, differs, shifted = "same_module.sin_float32_3", "module_differs.add_float32_3", "inputs_differ.sin_float32_3"
    assert set(on) == set(off) == {same, differs, shifted}
    downstream = ("compile/cpu", "execute/cpu", "compare/cpu", "crossexec/tpu")
    # the same module from the same inputs: compiled, run and compared once, for both configurations
    assert on[same]["lower/cpu"][2] == off[same]["lower/cpu"][2]
    assert {on[same][k][1] for k in downstream} == {off_id}, on[same]
    assert on[same]["compare/cpu"][0] == "ok"
    # another module (int64 iota with x64 on): computed again
    assert on[differs]["lower/cpu"][2] != off[differs]["lower/cpu"][2]
    assert {on[differs][k][1] for k in downstream} == {None}, on[differs]
    # the same module, other inputs: computed again
    assert on[shifted]["lower/cpu"][2] == off[shifted]["lower/cpu"][2]
    assert {on[shifted][k][1] for k in downstream} == {None}, on[shifted]
    assert all(on[n]["compare/cpu"][0] == "ok" for n in on)
