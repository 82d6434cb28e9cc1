"""farm repro for a failure of the symbolic stages (farm.repro.symbolic): a standalone
script (jax and numpy only) that exports f mapped over b with symbolic shapes, round-trips
the artifact and calls it at the failing size, judged against the float64 reference and the
static jit there. A planted symbolic-only fault travels in the farm's own artifact (the script
has no plant); a real finding (a width-changing bitcast whose symbolic artifact cannot be
called) is exported by the script itself. Every script runs where no farm is importable."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from farm.cli import main
from tests.helpers.repro import run_without_farm
from tests.helpers.shapes import PLANT, RUN, sweep

pytestmark = pytest.mark.slow
#: What a standalone script may import: jax and numpy (ml_dtypes ships with jax) and the standard library.
ALLOWED = {"os", "sys", "pathlib", "dataclasses", "subprocess", "traceback", "jax", "numpy", "ml_dtypes"}
BITCAST = "bitcast_convert_type_float32_3x4_to=int16"


def _imports(script: Path) -> set[str]:
    tree = ast.parse(script.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return {n.split(".")[0] for n in names}


@pytest.mark.slow(reason="a sweep, then its stored symbolic failure reproduced standalone in fresh processes")
def test_a_stored_symbolic_only_failure_reproduces_standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The Failures page's command for sin's symbolic-only cluster on tpu, run with the plant
    in force: the farm's symbolic artifact (made under the plant) fails at b = 1 standalone,
    and a clean artifact in its place passes (exit 0): exit 1 is the disagreement."""
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    sweep(url, RUN, PLANT, primitives="sin")
    monkeypatch.setenv("FARM_PLANT", PLANT)
    out = tmp_path / "repro"
    rc = main(["repro", "sin_float32_3x4", "--run", RUN, "--platform", "tpu", "--db", url, "-o", str(out)])
    said = capsys.readouterr().out
    assert rc == 0, said
    assert "symbolic_call on tpu fail" in said and "exits 1 standalone" in said
    script = out / "repro.py"
    assert _imports(script) <= ALLOWED, _imports(script)
    text = script.read_text()
    assert "symbolic_export.bin" in text and "SIZE = 'b=1,d3=3,d4=4'" in text and "def f(a):" in text
    assert (out / "symbolic_export.bin").exists() and (out / "inputs.npz").exists()
    p = run_without_farm(script)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "float32[b,d3,d4]" in p.stdout and "disagree with the float64 reference" in p.stdout
    assert "disagree with the static jit at b=1,d3=3,d4=4" in p.stdout and "still fails" in p.stdout

    monkeypatch.delenv("FARM_PLANT")  # this process has no plant: its export of the variant is right
    from farm import catalog
    from farm.repro.candidate import symbolic_export

    h = catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))[0]
    (out / "symbolic_export.bin").write_bytes(symbolic_export(h, ("tpu",)))
    fixed = run_without_farm(script)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "fixed: every output agrees" in fixed.stdout


def test_a_real_symbolic_finding_is_exported_by_the_script_itself(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """No plant: the script writes f out and exports it with jax.export.symbolic_shape and the
    record's specs; calling the artifact still raises (exit 1)."""
    out = tmp_path / "repro"
    rc = main(["repro", BITCAST, "--shapes", "symbolic", "--platform", "cpu", "-o", str(out)])
    said = capsys.readouterr().out
    assert rc == 0, said
    assert "symbolic_call on cpu expected_fail" in said
    script = out / "repro.py"
    assert _imports(script) <= ALLOWED and not (out / "symbolic_export.bin").exists()
    text = script.read_text()
    assert "jax.export.symbolic_shape(s, scope=scope)" in text and "SPECS = ('b, d3, d4',)" in text
    assert "lax.bitcast_convert_type(a, new_dtype=jnp.dtype('int16'))" in text
    p = run_without_farm(script)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "still fails: ValueError" in p.stdout and "refining shapes" in p.stdout


def test_a_symbolic_only_fault_is_nothing_to_reproduce_at_static_shapes(tmp_path: Path, monkeypatch: Any,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FARM_PLANT", PLANT)
    assert main(["repro", "sin_float32_3x4", "--platform", "tpu", "-o", str(tmp_path / "out")]) == 2
    assert "does not fail here" in capsys.readouterr().err
    assert main(["repro", "sin_float32_3x4", "--shapes", "symbolic,weird", "-o", str(tmp_path / "out")]) == 2
    assert "unknown shape kind (--shapes) 'weird'" in capsys.readouterr().err
