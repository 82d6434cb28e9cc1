"""farm repro for a failure of the derivatives' stages (farm.repro.gradients): a standalone
script (jax and numpy only) that serializes the export with vjp_order, deserializes it, takes
the vjp there and holds it against central finite differences of f in float64, in the
judge's directions, steps and bound. A planted wrong JVP rule (FARM_PLANT=wrong_jvp:sin)
travels in the farm's own artifact, made by a worker with the fault in force (the script has
no plant): with it the script exits 1 on the numbers the farm saw; with an artifact made
without the plant in its place, the same script exits 0. Every script runs where no farm is
importable."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from farm.cli import main
from tests.helpers.repro import run_without_farm

pytestmark = pytest.mark.slow
PLANT = "wrong_jvp:sin"
SIN = "sin_float32_3x4"
ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"os", "sys", "pathlib", "dataclasses", "traceback", "jax", "numpy", "ml_dtypes"}


def _imports(script: Path) -> set[str]:
    tree = ast.parse(script.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return {n.split(".")[0] for n in names}


def test_a_planted_wrong_jvp_reproduces_standalone_and_a_clean_artifact_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """sin run with --vjp 1 in an isolated worker under the plant: its vjp on ``platform``
    fails against finite differences; the script reproduces those numbers (exit 1) and passes
    (exit 0) once vjp_export.bin is made without the plant, and again with the script's own
    export of f in its place."""
    platform = "cpu"
    monkeypatch.setenv("FARM_PLANT", PLANT)
    out = tmp_path / "repro"
    rc = main(["repro", SIN, "--vjp", "1", "--platform", platform, "-o", str(out)])
    said = capsys.readouterr().out
    assert rc == 0, said
    assert f"vjp on {platform} fail" in said and "exits 1 standalone" in said
    script = out / "repro.py"
    assert _imports(script) <= ALLOWED, _imports(script)
    text = script.read_text()
    assert "vjp_export.bin" in text and "def f(a):" in text and "lax.sin(a)" in text and "ORDER = 1" in text
    assert f"PLATFORM = {platform!r}" in text and (out / "vjp_export.bin").exists() and (out / "point.npz").exists()
    env = json.loads((out / "environment.json").read_text())
    assert env["vjp"]["order"] == 1 and env["vjp"]["planted"] is True
    p = run_without_farm(script)
    assert p.returncode == 1, p.stdout + p.stderr
    # the farm's own numbers (its record's error), recomputed standalone
    assert "the artifact's 0.710517" in p.stdout and "finite differences of f in float64 -0.864022" in p.stdout
    assert "DISAGREE" in p.stdout and "still fails" in p.stdout

    monkeypatch.delenv("FARM_PLANT")  # this process has no plant: its vjp modules are right
    from farm.catalog import Filters, select
    from farm.repro.candidate import vjp_export
    from farm.repro.gradients import ARTIFACT_CODE, EXPORT_CODE
    from farm.results import LOWERING_PLATFORMS

    h = next(x for x in select(Filters.parse(primitive="sin", dtype="float32")) if x.name == SIN)
    (out / "vjp_export.bin").write_bytes(vjp_export(h, tuple(LOWERING_PLATFORMS), 1))
    fixed = run_without_farm(script)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "the artifact's -0.864022" in fixed.stdout and "fixed: the derivatives agree" in fixed.stdout

    (out / "vjp_export.bin").unlink()  # the script's own export of f (what it writes without a plant)
    script.write_text(text.replace(ARTIFACT_CODE, EXPORT_CODE))
    own = run_without_farm(script)
    assert own.returncode == 0, own.stdout + own.stderr
    assert "fixed: the derivatives agree" in own.stdout


@pytest.mark.slow(reason="a --vjp sweep, then its stored failure reproduced standalone in fresh processes")
def test_a_stored_vjp_failure_on_tpu_reproduces_standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`farm sweep --vjp 1` of sin under the plant into SQLite (its own process and Ray
    cluster), then `farm repro --run` for tpu's record: the run's stage sets the vjp order;
    tpu's part of the serialized vjp module, relabelled for the CPU, fails the same way."""
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    env = {k: v for k, v in os.environ.items() if k != "FARM_PLANT"} | {
        "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", "FARM_PLANT": PLANT}
    p = subprocess.run([sys.executable, "-m", "farm", "sweep", "--primitive", "sin", "--dtype", "float32",
                        "--vjp", "1", "--repeats", "1", "--workers", "1", "--force", "--name", "grad", "--db", url],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-4000:]  # 1: the sweep found failures
    monkeypatch.setenv("FARM_PLANT", PLANT)
    out = tmp_path / "repro"
    rc = main(["repro", SIN, "--run", "grad", "--platform", "tpu", "--db", url, "-o", str(out)])
    said = capsys.readouterr().out
    assert rc == 0, said
    assert "vjp on tpu fail" in said and "exits 1 standalone" in said
    assert "PLATFORM = 'tpu'" in (out / "repro.py").read_text()
    ran = run_without_farm(out / "repro.py")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "tpu's order-1 vjp taken on the CPU" in ran.stdout and "the artifact's 0.710517" in ran.stdout


def test_a_harness_that_does_not_fail_its_vjp_is_nothing_to_reproduce(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repro", SIN, "--vjp", "1", "-o", str(tmp_path / "out")]) == 2
    assert "does not fail here" in capsys.readouterr().err


def test_stage_picks_the_order_two_failure_and_a_bad_stage_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Under the plant sin fails at vjp and at vjp2; without --stage the first (vjp) is
    written, with --stage vjp2 the order-2 one (the harness run with --vjp 2 to find it),
    and the script reproduces it standalone. An unknown stage is one line and exit 2."""
    monkeypatch.setenv("FARM_PLANT", PLANT)
    out = tmp_path / "two"
    rc = main(["repro", SIN, "--stage", "vjp2", "--platform", "cpu", "-o", str(out)])
    said = capsys.readouterr().out
    assert rc == 0, said
    assert "vjp2 on cpu fail" in said
    text = (out / "repro.py").read_text()
    assert "ORDER = 2" in text
    p = run_without_farm(out / "repro.py")
    assert p.returncode == 1, p.stdout + p.stderr
    bad = subprocess.run([sys.executable, "-m", "farm", "repro", SIN, "--stage", "vjp3", "-o", str(tmp_path / "x")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown stage 'vjp3'" in lines[0] and "vjp2" in lines[0], lines
    assert not (tmp_path / "x").exists()
