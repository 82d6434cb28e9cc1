"""farm repro keeps the environment a failure lives in (farm.repro.needs): a lowering rule
patched from a sitecustomize on PYTHONPATH gives a reproducer that records the overlay
(environment.json's ``needs``), runs in it through ``run.sh`` and exits 1 there, and exits
0 run plainly without it. Before, the script was verified in a scrubbed environment, said
"fixed", and no reproducer was written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from farm.repro.needs import FARM_ROOT, capture
from tests.helpers.patches import SITECUSTOMIZE
from tests.helpers.repro import run_without_farm

ROOT = Path(__file__).resolve().parents[1]
SIN = "sin_float32_3x4"


def test_needs_keep_the_overlay_and_the_variables_but_not_the_farm(tmp_path) -> None:  # noqa: ANN001
    import site

    overlay = tmp_path / "overlay"
    overlay.mkdir()
    environ = {"PYTHONPATH": os.pathsep.join([str(overlay), str(ROOT), site.getsitepackages()[0],
                                              str(tmp_path / "missing"), ""]),
               "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_TRACEBACK_FILTERING": "off",
               "FARM_PLANT": "wrong_lowering:sin:cpu", "EDITOR": "vi", "CUDA_VISIBLE_DEVICES": "0"}
    n = capture({"JAX_ENABLE_X64": "1"}, ("JAX_ENABLE_X64", "XLA_FLAGS"), environ)
    assert n.pythonpath == (os.path.realpath(overlay),)  # not the farm, the site directory, a missing one, ''
    assert FARM_ROOT == os.path.realpath(ROOT)
    # the script's settings replace the farm's (its forced device count), the farm's own and unrelated ones go
    assert n.variables == {"JAX_TRACEBACK_FILTERING": "off", "JAX_ENABLE_X64": "1"}
    env = n.env({"PATH": "/bin", "HOME": "/h", "SHELL": "/bin/sh"})
    assert env == {"PATH": "/bin", "HOME": "/h", "PYTHONPATH": os.path.realpath(overlay),
                   "JAX_TRACEBACK_FILTERING": "off", "JAX_ENABLE_X64": "1"}
    assert n.env({"PATH": "/bin"}, plain=True) == {"PATH": "/bin"}
    sh = n.run_sh()
    assert f"PYTHONPATH={os.path.realpath(overlay)} \\" in sh and "JAX_TRACEBACK_FILTERING=off \\" in sh
    # the farm checkout is on no path the script gets (its interpreter may live in the checkout's .venv)
    assert str(ROOT) not in sh.replace(f"${{PYTHON:-{n.python}}}", "") and "FARM_PLANT" not in sh


@pytest.mark.slow
def test_a_rule_patched_by_a_sitecustomize_is_reproduced_in_its_overlay(tmp_path) -> None:  # noqa: ANN001
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "sitecustomize.py").write_text(SITECUSTOMIZE)  # sin lowers as cos, in every process of the farm
    out = tmp_path / "repro"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(overlay), str(ROOT)])}
    env.pop("FARM_PLANT", None)
    p = subprocess.run([sys.executable, "-m", "farm", "repro", SIN, "-o", str(out), "--minimize"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "without its overlay: exits 0" in p.stdout, p.stdout

    needs = json.loads((out / "environment.json").read_text())["needs"]
    assert needs["pythonpath"] == [os.path.realpath(overlay)]
    assert needs["modules"] == {"sitecustomize": os.path.realpath(overlay / "sitecustomize.py")}
    assert "PYTHONPATH=" in (out / "repro.py").read_text() and "./run.sh" in (out / "repro.py").read_text()
    run_sh = out / "run.sh"
    assert os.access(run_sh, os.X_OK)
    assert " sin " in (out / "minimized.jaxpr").read_text()

    codes = {}
    for script in ("repro.py", "repro_full.py"):
        with_overlay = subprocess.run([str(run_sh), script], capture_output=True, text=True, timeout=300,
                                      env={"PATH": os.environ["PATH"]})
        plain = run_without_farm(out / script)  # no overlay, no farm
        codes[script] = (with_overlay.returncode, plain.returncode)
        assert with_overlay.returncode == 1, with_overlay.stdout + with_overlay.stderr
        assert plain.returncode == 0, plain.stdout + plain.stderr
    print("exit codes (run.sh, plain):", codes)
