"""farm repro for a failure judged by an invariant (farm.repro.invariant): a non-unique
result (eigh's eigenvectors) gets a standalone NumPy check of its residuals with the
farm's bound (``invariant_bound``, written into the script), not an element-by-element
comparison with one valid answer. The failure is planted: float64 eigh computed in float32
(``low_precision``, farm/faults/planted.py), baked into the export the script runs."""
from __future__ import annotations

import numpy as np
import pytest

from farm.cli import main
from farm.reference.invariants import invariant_bound
from tests.helpers.repro import run_without_farm

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


@pytest.mark.parametrize("prim", ["eigh", "eig", "svd", "qr"])
def test_standalone_residuals_pass_a_correct_result_and_fail_a_perturbed_one(prim: str) -> None:
    """The scripts' NumPy residuals (farm.repro.invariant.CODE) on NumPy's own decompositions:
    within 16 n eps, and far over it once one element of one factor moves by 1e-6."""
    from farm.repro.invariant import CODE

    ns: dict = {"np": np}
    exec(CODE, ns)  # noqa: S102
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5))
    params: dict = {}
    if prim == "eigh":
        a = a + a.T
        w, v = np.linalg.eigh(a)
        got = {0: v, 1: w}
    elif prim == "eig":
        w, vr = np.linalg.eig(a)
        wl, vl = np.linalg.eig(a.conj().T)  # left eigenvectors, paired with w by value
        vl = vl[:, [int(np.argmin(np.abs(wl.conj() - x))) for x in w]]
        got = {0: w, 1: vl, 2: vr}
    elif prim == "svd":
        u, s, vt = np.linalg.svd(a, full_matrices=False)
        got = {0: s, 1: u, 2: vt}
    else:
        q, r = np.linalg.qr(a)
        got = {0: q, 1: r}
    bound = invariant_bound(np.float64, 5)
    assert all(err <= bound for _, err in ns["residuals"](prim, params, a, got)), ns["residuals"](prim, params, a, got)
    k = 1 if prim in ("eig", "svd") else 0  # a vector factor
    bad = {**got, k: got[k] + 1e-6 * np.eye(*got[k].shape)[::-1]}
    assert any(err > 100 * bound for _, err in ns["residuals"](prim, params, a, bad))
