"""farm repro: standalone reproducers and the minimizer, on a planted fault and a real
XLA CPU finding, each script run in a subprocess that cannot import the farm."""
from __future__ import annotations

import json

import numpy as np
import pytest

from farm.cli import main
from farm.repro.minimize import ddmin
from tests.helpers.repro import run_without_farm

CHAIN = "planted_ok.chain_float32_8x4_8x4"
#: XLA CPU's atan2 with subnormal arguments (docs/findings.md): a declared Limitation, still a bug
ATAN2 = "special_values.atan2_float32_361_361"


def test_ddmin_finds_a_one_minimal_subset() -> None:
    tried = []

    def fails(subset: list[int]) -> bool:
        tried.append(subset)
        return {3, 11} <= set(subset)

    assert ddmin(list(range(16)), fails) == [3, 11]
    assert [] in tried  # the empty set first: a failure that needs none of the items


def test_emitted_code_traces_back_to_the_same_jaxpr() -> None:
    import jax
    from jax import lax

    from farm.repro import emit

    x, w = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 2, 2), np.float32)
    closed = jax.make_jaxpr(lambda a, b: lax.tanh(lax.conv_general_dilated(a, b, (1, 2), ((1, 0), (0, 1)))))(x, w)
    ns: dict = {}
    exec(emit.function(closed), {"lax": lax, "jnp": jax.numpy, "np": np}, ns)  # noqa: S102
    assert str(jax.make_jaxpr(ns["f"])(x, w)) == str(closed)


@pytest.mark.slow
def test_planted_wrong_rule_is_minimized_to_its_one_equation(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setenv("FARM_PLANT", "wrong_lowering:sin:cpu")  # sin lowers as cos, in the farm's workers
    rc = main(["repro", CHAIN, "--catalog", "planted_chain", "--modules", "harnesses.planted_chain", "-o", str(tmp_path),
               "--minimize"])
    assert rc == 0, capsys.readouterr().out
    jaxpr = (tmp_path / "minimized.jaxpr").read_text()
    assert " sin " in jaxpr and jaxpr.count(" = ") == 1  # nine equations in, the wrong one out
    steps = json.loads((tmp_path / "steps.json").read_text())
    assert steps["start"]["eqns"] == 9 and steps["end"]["eqns"] == 1 and steps["seconds"] > 0
    assert any(not s["kept"] for s in steps["steps"])  # candidates that lost the failure were refused
    for name in ("repro.py", "repro_full.py"):  # the planted rule is baked into the exports they carry
        p = run_without_farm(tmp_path / name)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "still fails" in p.stdout


@pytest.mark.slow
def test_real_finding_reproduces_without_the_farm(tmp_path, capsys) -> None:  # noqa: ANN001
    assert main(["repro", ATAN2, "-o", str(tmp_path)]) == 0, capsys.readouterr().out
    script = tmp_path / "repro.py"
    assert "farm" not in "".join(line for line in script.read_text().splitlines() if "import" in line)
    p = run_without_farm(script)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "nan" in p.stdout  # atan2(1e-45, 1e-45) is NaN on XLA CPU, pi/4 in the reference
    # the same script against the expected values themselves: the check passes (exit 0), so
    # exit 1 above is the disagreement, not a script that always fails
    exp = np.load(tmp_path / "expected.npz")
    outs = np.asarray(exp["out0_0"]).astype(np.float32)
    text = script.read_text().replace("prepare(inputs)(*inputs)",
                                      f"[np.{outs.dtype}(np.load(HERE / 'expected.npz')['out0_0'])]")
    assert text != script.read_text()
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text)
    assert run_without_farm(fixed).returncode == 0


def test_unknown_harness_is_one_line_exit_2(capsys) -> None:  # noqa: ANN001
    assert main(["repro", "atan2_nosuch", "--catalog", "farm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no harness 'atan2_nosuch'" in err[0]


@pytest.mark.slow
def test_passing_harness_is_refused_exit_2(tmp_path, capsys) -> None:  # noqa: ANN001
    assert main(["repro", "planted_ok.sin_float32_4", "--catalog", "planted", "--modules", "harnesses.planted",
                 "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not fail here" in err[0] and "nothing to reproduce" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_stored_api_catalog_failure_reproduces_from_its_run(tmp_path, capsys) -> None:  # noqa: ANN001
    """`farm repro NAME --run R` of an api-catalog run looks the harness up in the api catalog
    (it fell back to farm+upstream, where no `scipy.special.*` harness is: "no harness").
    bessel_jn's NaN for |z| <= 2 (a finding, expected_fail) is written as a script that exits 1
    with only jax and numpy."""
    from farm import catalog
    from farm.host import describe
    from farm.pipeline import run_harness
    from farm.results import Options
    from farm.run import bundles as bundle
    from farm.store import open_store

    hs = catalog.select(catalog.Filters.parse(catalog="api", primitive="bessel_jn", dtype="float32"))
    assert len(hs) == 1
    opts = Options(platforms=("cpu",), run_on=("cpu",), crossexec=False, repeats=1)
    outcome = run_harness(hs[0], opts)
    assert {(r.stage, r.status) for r in outcome.records if r.platform == "cpu"} >= {("compare", "expected_fail")}
    path, url = str(tmp_path / "b.json.gz"), f"sqlite:///{tmp_path / 'api.db'}"
    bundle.write(path, environment=describe(), run={"name": "api", "catalog": "api", "platforms": ["cpu"],
                                                    "run_on": ["cpu"]},
                 harnesses=[hs[0].describe()], outcomes=[outcome])
    store = open_store(url)
    bundle.import_bundle(store, path, name="api")
    store.dispose()
    out = tmp_path / "repro"
    assert main(["repro", hs[0].name, "--run", "api", "--db", url, "-o", str(out)]) == 0, capsys.readouterr()
    assert "compare on cpu expected_fail" in capsys.readouterr().out
    p = run_without_farm(out / "repro.py")
    assert p.returncode == 1 and "nan" in p.stdout.lower(), p.stdout + p.stderr
