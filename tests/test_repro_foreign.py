"""farm repro for xhost failures (farm.repro.foreign): another host's artifact, read from a
real stored run in a SQLite store, written as a script that deserializes and runs it, run
in a subprocess that cannot import the farm.

The "other host" is a standalone worker with a planted wrong lowering rule (sin lowers as
cos: the artifact it exports carries the wrong rule); a clean worker then runs that
artifact in the xhost stage (the device-host path, `farm jobs --priors-from`), and the
store holds both runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from farm.cli import main
from tests.helpers.repro import run_without_farm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAIN = "planted_ok.chain_float32_8x4_8x4"
pytestmark = pytest.mark.slow  # standalone workers in subprocesses
SELECT = ["--catalog", "planted_chain", "--modules", "harnesses.planted_chain", "--match", CHAIN]


def _farm(args: list[str], plant: str = "") -> str:
    env = {**os.environ, "PYTHONPATH": ROOT, "FARM_PLANT": plant, "RAY_USAGE_STATS_ENABLED": "0"}
    p = subprocess.run([sys.executable, "-m", "farm", *args], env=env, capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stdout


@pytest.fixture(scope="module")
def stored(tmp_path_factory):  # noqa: ANN001, ANN201
    """(db url, dir): run "exporter" (planted, sin lowers as cos) and run "runner" (clean), which
    ran the exporter's artifact in the xhost stage."""
    d = tmp_path_factory.mktemp("xhost")
    url = f"sqlite:///{d}/farm.db"
    _farm(["jobs", *SELECT, "--platforms", "cpu", "--repeats", "1", "--out", str(d / "a.json")])
    _farm(["worker", "--standalone", "--jobs", str(d / "a.json"), "--out", str(d / "a.json.gz")],
          plant="wrong_lowering:sin:cpu")
    _farm(["import", str(d / "a.json.gz"), "--name", "exporter", "--db", url])
    _farm(["jobs", *SELECT, "--platforms", "cpu", "--repeats", "1", "--priors-from", "exporter", "--db", url,
           "--out", str(d / "b.json")])
    _farm(["worker", "--standalone", "--jobs", str(d / "b.json"), "--out", str(d / "b.json.gz")])
    _farm(["import", str(d / "b.json.gz"), "--name", "runner", "--db", url])
    return url, d


def test_xhost_failure_reproduces_from_the_stored_artifact(stored, tmp_path, capsys) -> None:  # noqa: ANN001
    url, _ = stored
    out = tmp_path / "repro"
    rc = main(["repro", CHAIN, "--run", "runner", "--exported-by", "exporter", *SELECT[:4], "-o", str(out),
               "--db", url])
    said = capsys.readouterr().out
    assert rc == 0, said
    assert "xhost on cpu fail" in said and "exits 1" in said
    env = json.loads((out / "environment.json").read_text())
    assert env["exporter"] == "exporter" and env["run"] == "runner"
    assert env["failure"]["facts"]["vs_reference"] == "fail" and env["failure"]["facts"]["vs_cpu_host"] == "ok"
    text = (out / "repro.py").read_text()
    assert "jax.export.deserialize" in text and "farm" not in "".join(
        line for line in text.splitlines() if "import" in line)
    p = run_without_farm(out / "repro.py")
    assert p.returncode == 1, p.stdout + p.stderr
    # the artifact agrees with its exporter's outputs and disagrees with the float64 reference
    assert "disagree with the float64 reference" in p.stdout
    assert "own outputs (the exporter's)" not in p.stdout and "still fails" in p.stdout


def test_the_script_passes_an_artifact_without_the_fault(stored, tmp_path, capsys) -> None:  # noqa: ANN001
    """The same script with a clean export of the harness (the runner's own lowering) in place of
    the planted one: the reference side agrees, the exporter's outputs do not (they are cos);
    with the clean outputs as the exporter's too, it exits 0."""
    url, d = stored
    out = tmp_path / "repro"
    assert main(["repro", CHAIN, "--run", "runner", "--exported-by", "exporter", *SELECT[:4], "-o", str(out),
                 "--db", url]) == 0, capsys.readouterr().out
    import jax
    import numpy as np

    from farm.repro.candidate import load_harness

    h = load_harness("planted_chain", ("harnesses.planted_chain",), CHAIN)
    args = [np.asarray(a) for a in h.make_args()]
    clean = jax.export.export(jax.jit(h.fun))(*args)
    (out / "export.bin").write_bytes(clean.serialize())
    p = run_without_farm(out / "repro.py")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "exporter's" in p.stdout and "float64 reference" not in p.stdout
    # and with the clean outputs as the exporter's too, nothing disagrees: exit 0
    from farm.repro.write import npz

    outs = jax.tree.leaves(clean.call(*args))
    npz(out / "expected.npz", {f"out{i}_0": np.asarray(o) for i, o in enumerate(outs)})
    p = run_without_farm(out / "repro.py")
    assert p.returncode == 0 and "fixed" in p.stdout, p.stdout + p.stderr


def test_an_xhost_run_without_its_exporter_is_one_line_exit_2(stored, tmp_path, capsys) -> None:  # noqa: ANN001
    url, _ = stored
    assert main(["repro", CHAIN, "--run", "runner", *SELECT[:4], "-o", str(tmp_path / "o"), "--db", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--exported-by" in err[0]
    assert main(["repro", CHAIN, "--run", "runner", "--exported-by", "nosuch", *SELECT[:4], "-o", str(tmp_path / "o"),
                 "--db", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nosuch" in err[0]
    assert not (tmp_path / "o").exists()
