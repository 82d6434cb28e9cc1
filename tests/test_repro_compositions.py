"""farm repro for a composition failure (farm.repro.compositions): a standalone script (jax and
numpy only) that calls the farm's own artifact on its own and inside the composition that
failed, and holds one against the other. The GSPMD call bug (docs/findings.md) reproduces:
the script exits 1 under GSPMD and 0 once Shardy is the partitioner. A planted batching rule
(FARM_PLANT=vmap_exported) lives in the farm's process, not in jax: the farm sees the fail, and
says its script does not reproduce it standalone. Every script runs where no farm is importable."""
from __future__ import annotations

from pathlib import Path

import pytest

from farm.cli import main
from tests.helpers.repro import run_without_farm

pytestmark = pytest.mark.slow
GSPMD = "sharding_psum.psum_float32_2x4_mesh=1x2_partitioner=gspmd"
SIN = "sin_float32_3x4"


def test_the_gspmd_call_bug_reproduces_standalone_and_shardy_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gspmd"
    rc = main(["repro", GSPMD, "--stage", "composition", "-o", str(out)])
    said = capsys.readouterr().out
    assert rc == 0, said
    assert "composition on call expected_fail" in said and "exits 1 standalone" in said
    script = out / "repro.py"
    assert {p.name for p in out.iterdir()} >= {"repro.py", "export.bin", "inputs.npz", "environment.json"}
    res = run_without_farm(script)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    assert "still fails" in res.stdout and "TensorShardingPerValueAttr" in res.stdout
    shardy = out / "shardy.py"
    text = script.read_text()
    assert "'JAX_USE_SHARDY_PARTITIONER': '0'" in text
    shardy.write_text(text.replace("'JAX_USE_SHARDY_PARTITIONER': '0'", "'JAX_USE_SHARDY_PARTITIONER': '1'"))
    res = run_without_farm(shardy)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "fixed" in res.stdout


def test_a_planted_vmap_fault_is_the_farms_and_the_other_compositions_agree_standalone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FARM_PLANT", "vmap_exported")
    out = tmp_path / "vmap"
    rc = main(["repro", SIN, "--stage", "composition", "--platform", "vmap", "-o", str(out)])
    said = capsys.readouterr()
    assert rc != 0
    assert "composition on vmap fail" in said.out and "does not exit 1 standalone" in said.err + said.out
    script = out / "repro.py"
    res = run_without_farm(script)  # plain jax refuses vmap of an exported call: the planted rule was the farm's
    assert res.returncode == 2 and "Batching rule for 'call_exported' not implemented" in res.stdout + res.stderr
    text = script.read_text()
    for other in ("scan", "nested", "jit_sharded", "donated"):  # the same artifact, composed as the sweep does
        path = out / f"{other}.py"
        path.write_text(text.replace("COMPOSITION = 'vmap'", f"COMPOSITION = {other!r}"))
        res = run_without_farm(path)
        assert res.returncode == 0, (other, res.stdout[-2000:] + res.stderr[-2000:])
        assert "fixed: every output agrees" in res.stdout
