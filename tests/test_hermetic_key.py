"""Every way into a worker is in the result key: code that patches jax from outside the
hashed trees (an overlay directory on PYTHONPATH, a sitecustomize, a ``jax_plugins``
namespace module that is no installed distribution, a ``--modules`` module) and any
environment variable jax, XLA or a plugin reads. Each case sweeps twice with real Ray
workers: once plainly, then with the patch (``sin`` lowered as ``cos``) or the variable
(``JAX_RANDOM_SEED_OFFSET`` shifts every PRNG key): the second sweep must not be served
the first one's ``ok``."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.patches import PATCH, SITECUSTOMIZE

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
SIN, RANDOM = "sin_float32_3x4", "random_seed_uint32_scalar"

#: An overlay of a module jax imports (opt_einsum): the real one, and the patch.
OVERLAY = PATCH + '''
import os, sys

_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_real = next(os.path.join(d, "opt_einsum") for d in sys.path
             if d and os.path.abspath(d) != _here and os.path.isfile(os.path.join(d, "opt_einsum", "__init__.py")))
__path__ = [_real]
with open(os.path.join(_real, "__init__.py")) as _f:
    exec(compile(_f.read(), os.path.join(_real, "__init__.py"), "exec"))
patch()
'''


def _sweep(db: Path, name: str, pythonpath: list[Path], env: dict[str, str] | None = None, *extra: str) -> str:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, pythonpath), str(ROOT)]),
               "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
    p = subprocess.run([sys.executable, "-m", "farm", "sweep", "--db", f"sqlite:///{db}", "--match", f"{SIN},{RANDOM}",
                        "--platforms", "cpu", "--no-crossexec", "--repeats", "1", "--workers", "1", "--name", name,
                        *extra], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stderr


def _outcome(db: Path, run: str, harness: str) -> tuple[str, int | None]:
    """(the compare status on cpu, the run it was copied from: None when computed)."""
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT r.status, o.cached_from FROM results r JOIN runs ON runs.id = r.run_id "
            "JOIN harnesses h ON h.id = r.harness_id JOIN harness_outcomes o ON o.run_id = r.run_id "
            "AND o.harness_id = r.harness_id WHERE runs.name = ? AND h.name = ? AND r.stage = 'compare' "
            "AND r.platform = 'cpu'", (run, harness)).fetchone()
    finally:
        con.close()


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:  # noqa: ANN001
    """A database with one plain sweep: both harnesses computed, both ``ok``."""
    db = tmp_path_factory.mktemp("plain") / "farm.db"
    _sweep(db, "plain", [])
    assert _outcome(db, "plain", SIN) == ("ok", None) and _outcome(db, "plain", RANDOM) == ("ok", None)
    log = _sweep(db, "again", [])  # nothing changed: served whole (the driver's key is the workers')
    assert ": 0 run (" in log and "reused whole" in log, log
    return db


def _copy(plain: Path, tmp_path: Path) -> Path:
    db = tmp_path / "farm.db"
    shutil.copy(plain, db)
    return db


def _check_sin_recomputed(db: Path, run: str, log: str) -> None:
    status, cached_from = _outcome(db, run, SIN)
    assert cached_from is None, f"{SIN} was served from run {cached_from}:\n{log}"
    assert status == "fail", log  # the patch ran in the worker: sin computes cos


@pytest.mark.slow(reason="sweeps in fresh processes with and without an overlay, each importing jax")
def test_overlay_on_pythonpath(plain, tmp_path) -> None:  # noqa: ANN001
    """A directory on PYTHONPATH shadows opt_einsum (which jax imports) and patches jax."""
    db = _copy(plain, tmp_path)
    overlay = tmp_path / "overlay"
    (overlay / "opt_einsum").mkdir(parents=True)
    (overlay / "opt_einsum" / "__init__.py").write_text(OVERLAY)
    log = _sweep(db, "overlay", [overlay])
    _check_sin_recomputed(db, "overlay", log)


def test_sitecustomize(plain, tmp_path) -> None:  # noqa: ANN001
    db = _copy(plain, tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = _sweep(db, "sitecustomize", [site])
    _check_sin_recomputed(db, "sitecustomize", log)


def test_jax_plugins_namespace_module(plain, tmp_path) -> None:  # noqa: ANN001
    """A ``jax_plugins.*`` module that no distribution installed: jax imports it, and
    calls its ``initialize``, when its backends start (in the worker, not the driver)."""
    db = _copy(plain, tmp_path)
    plugins = tmp_path / "plugins"
    (plugins / "jax_plugins" / "farm_test_patch").mkdir(parents=True)
    (plugins / "jax_plugins" / "farm_test_patch" / "__init__.py").write_text(PATCH + "\n\ndef initialize():\n    patch()\n")
    log = _sweep(db, "plugin", [plugins])
    _check_sin_recomputed(db, "plugin", log)


def test_modules_option(plain, tmp_path) -> None:  # noqa: ANN001
    """``farm sweep --modules M``: the driver and every worker import M."""
    db = _copy(plain, tmp_path)
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "farm_test_patch_module.py").write_text(PATCH + "\n\npatch()\n")
    log = _sweep(db, "modules", [mods], None, "--modules", "farm_test_patch_module")
    _check_sin_recomputed(db, "modules", log)


def test_environment_variable_not_on_a_list(plain, tmp_path) -> None:  # noqa: ANN001
    """``JAX_RANDOM_SEED_OFFSET`` (one of jax's config options) shifts every PRNG seed:
    the random harness's module and its values change."""
    db = _copy(plain, tmp_path)
    log = _sweep(db, "offset", [], {"JAX_RANDOM_SEED_OFFSET": "1"})
    status, cached_from = _outcome(db, "offset", RANDOM)
    assert cached_from is None, f"{RANDOM} was served from run {cached_from}:\n{log}"
    assert status == "fail", log
