"""farm repro for a failure judged by an invariant (farm.repro.invariant): a non-unique
result (eigh's eigenvectors) gets a standalone NumPy check of its residuals with the
farm's bound (``invariant_bound``, written into the script), not an element-by-element
comparison with one valid answer. The failure is planted: float64 eigh computed in float32
(``low_precision``, farm/pipeline/faults.py), baked into the export the script runs."""
from __future__ import annotations

import numpy as np
import pytest

from farm.cli import main
from farm.reference.tolerance import invariant_bound
from tests.test_repro import run_without_farm

EIGH = "eigh_float64_4x4"


@pytest.mark.slow
def test_invariant_failure_gets_a_standalone_check_with_the_farms_bound(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setenv("FARM_PLANT", "low_precision:eigh:float64:float32")
    assert main(["repro", EIGH, "-o", str(tmp_path)]) == 0, capsys.readouterr().out
    script = tmp_path / "repro.py"
    text = script.read_text()
    bound = invariant_bound(np.float64, 4)
    assert repr(bound) in text and '"primitive": "eigh"' in text
    p = run_without_farm(script)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "eigh invariant ||A V - V diag(w)|| / ||A||" in p.stdout and "over the bound" in p.stdout
    # the eigenvectors (output 0) are judged by the invariant only; the eigenvalues (unique) by value
    assert "output 0:" not in p.stdout and "output 1:" in p.stdout

    # a correct eigendecomposition of the same operand passes both sides: exit 0
    import jax

    op = np.load(tmp_path / "invariant.npz")["operand"]
    w, v = np.linalg.eigh(op)
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text.replace("        outs = [np.asarray(o) for o in jax.tree.leaves(prepare(inputs)(*inputs))]",
                                  "        outs = [np.asarray(V), np.asarray(W)]")
                     .replace("def INPUTS():", f"V = np.array({v.tolist()!r})\nW = np.array({w.tolist()!r})\n\n\ndef INPUTS():"))
    p = run_without_farm(fixed)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "within the bound" in p.stdout
    del jax
