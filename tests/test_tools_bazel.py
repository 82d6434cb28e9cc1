"""Bazel's harness family tests are keyed on what is installed, not only on requirements.txt.

What it checks: `bazel test` of a family test re-runs it when the installation digest
(farm.cache.key.installation(): jax, jaxlib, plugins, numpy/scipy/ml_dtypes) changes while
requirements.txt and the sources stay the same, and gives "(cached) PASSED" when the
digest did not change. On the old setup (tests keyed on requirements.txt only) the run
after the change is "(cached) PASSED" and this test fails.

How the installation is changed, for real and without touching .venv: a modified copy
of ml_dtypes (one line appended to its __init__.py) is put first on PYTHONPATH of the
`bazel` command. importlib's find_spec follows sys.path, so the digest, computed by
tools/bazel/workspace_status.sh with the venv's Python in the user's environment,
hashes the copy and changes exactly as after an upgrade or an edit in an editable
checkout. (The test action itself runs in Bazel's strict environment, without that
PYTHONPATH: only the keying is under test here, not what jax the test imports.)

Isolation: a copy of the workspace in a temporary directory (its .venv a symlink to the
real one), with a tiny extra family target (`harness_family_test`, the same macro as
every family, running a one-line pytest file), its own Bazel output base (deleted at
the end, server shut down) and a copy of the file-digest memo (FARM_DIGEST_CACHE), so
neither the real workspace, its Bazel cache nor the shared memo is touched. About 20 s (45 s on a busy machine).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python3"
TARGET = "//harnesses:digest_probe"

_IGNORE_ANYWHERE = shutil.ignore_patterns("node_modules", "__pycache__", "*.pyc", "*.db", "*.db-*", ".pytest_cache")
#: Top-level entries not to copy (the checkout's own Bazel symlinks, venv, outputs).
_IGNORE_TOP = shutil.ignore_patterns(".git", ".venv", "bazel-*", "*.egg-info", "user.bazelrc", "test-artifacts",
                                     "out", "artifacts", "build", "dist")


def _ignore(directory: str, names: list[str]) -> set[str]:
    skip = set(_IGNORE_ANYWHERE(directory, names))
    if Path(directory) == ROOT:
        skip |= set(_IGNORE_TOP(directory, names))
    return skip

_PROBE_BUILD = '''
# Added by tests/test_tools_bazel.py in a throwaway copy of the workspace.
harness_family_test(
    name = "digest_probe",
    family = "digest_probe",
    test_file = ":digest_probe_test.py",
)
'''

_PROBE_TEST = "def test_ran():\n    pass\n"


def _bazel() -> str | None:
    return shutil.which("bazel")


pytestmark = [
    pytest.mark.skipif(_bazel() is None, reason="bazel not on PATH (run ./dev setup)"),
    pytest.mark.skipif(not VENV_PY.exists(), reason=".venv missing (run ./dev setup)"),
]


@pytest.fixture(scope="module")
def workspace():
    tmp = Path(tempfile.mkdtemp(prefix="farm-bazel-digest-"))
    ws = tmp / "ws"
    shutil.copytree(ROOT, ws, ignore=_ignore, symlinks=True)
    (ws / ".venv").symlink_to(ROOT / ".venv")
    with open(ws / "harnesses" / "BUILD.bazel", "a") as f:
        f.write(_PROBE_BUILD)
    (ws / "harnesses" / "digest_probe_test.py").write_text(_PROBE_TEST)

    # A private copy of the file-digest memo: warm (jaxlib is not re-hashed), and the
    # shadow package's paths do not end up in the shared one.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FARM_DIGEST_CACHE")}
    memo = Path(os.environ.get("FARM_DIGEST_CACHE") or
                Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lowering-farm" /
                "file-digests.json")
    env["FARM_DIGEST_CACHE"] = str(tmp / "file-digests.json")
    if memo.exists():
        shutil.copy(memo, env["FARM_DIGEST_CACHE"])

    # The "changed installation": ml_dtypes copied and edited, to shadow the real one.
    shadow = tmp / "shadow"
    spec = subprocess.run([str(VENV_PY), "-c", "import importlib.util as u; "
                           "print(u.find_spec('ml_dtypes').submodule_search_locations[0])"],
                          check=True, capture_output=True, text=True, env=env).stdout.strip()
    shutil.copytree(spec, shadow / "ml_dtypes", ignore=shutil.ignore_patterns("__pycache__"))
    with open(shadow / "ml_dtypes" / "__init__.py", "a") as f:
        f.write("\n# edited by tests/test_tools_bazel.py\n")

    startup = [f"--output_base={tmp / 'ob'}", "--max_idle_secs=120"]
    # a private disk cache (the shared one in ~/.cache would hold this probe's results from an
    # earlier run of this test: its first run here would be "(cached)")
    env["FARM_TEST_DISK_CACHE"] = str(tmp / "disk-cache")
    try:
        yield ws, env, shadow, startup
    finally:
        for ob in (tmp / "ob", tmp / "ob2"):
            if ob.exists():
                subprocess.run([_bazel(), f"--output_base={ob}", "shutdown"], cwd=ws, env=env, capture_output=True,
                               timeout=120)
        subprocess.run(["chmod", "-R", "u+w", str(tmp)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def _digest(ws: Path, env: dict[str, str]) -> str:
    out = subprocess.run([str(VENV_PY), str(ws / "tools" / "bazel" / "install_digest.py")], cwd=ws, env=env,
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _test(ws: Path, env: dict[str, str], startup: list[str]) -> str:
    """`bazel test TARGET`; returns its summary line ('PASSED' or '(cached) PASSED'...)."""
    p = subprocess.run([_bazel(), *startup, "test", TARGET, "--color=no", "--curses=no", "--test_output=errors",
                        f"--disk_cache={env['FARM_TEST_DISK_CACHE']}"],
                       cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    m = re.search(rf"^{re.escape(TARGET)}\s+(.*?)\s+in\s+[\d.]+s\s*$", out, re.M)
    assert m, out[-4000:]
    return m.group(1)


def test_installation_digest_keys_family_tests(workspace):
    ws, env, shadow, startup = workspace
    requirements = (ws / "requirements.txt").read_bytes()
    changed = {**env, "PYTHONPATH": str(shadow)}
    before, after = _digest(ws, env), _digest(ws, changed)
    assert before != after, "the shadowed ml_dtypes did not change the installation digest"

    assert _test(ws, env, startup) == "PASSED"                 # first run in a fresh output base
    assert _test(ws, env, startup) == "(cached) PASSED"        # nothing changed
    assert _test(ws, changed, startup) == "PASSED", (          # installation changed: re-run
        "a changed installation (same requirements.txt) gave a cached result")
    assert _test(ws, changed, startup) == "(cached) PASSED"    # unchanged again: cached

    assert (ws / "requirements.txt").read_bytes() == requirements
    keyed = (ws / "bazel-bin" / "tools" / "bazel" / "install_digest.txt").read_text()
    assert f"STABLE_FARM_INSTALL_DIGEST {after}" in keyed.splitlines()


def test_a_second_clone_reuses_results_and_a_changed_source_runs_again(workspace):
    """The disk cache is shared between clones at different paths (the launchers name an
    interpreter keyed on the installation, tools/bazel/stable_python.py): a copy of the
    workspace elsewhere, in its own output base, gets the first copy's result; an edited
    test file in it runs again. Before, each clone's launchers named its own .venv path and
    the second clone ran everything again."""
    ws, env, _, startup = workspace
    assert _test(ws, env, startup) in ("PASSED", "(cached) PASSED")  # the first clone's result is in the cache
    other = ws.parent / "elsewhere" / "ws"
    shutil.copytree(ws, other, symlinks=True, ignore=shutil.ignore_patterns("bazel-*"))
    startup2 = [f"--output_base={ws.parent / 'ob2'}", "--max_idle_secs=120"]
    assert _test(other, env, startup2) == "(cached) PASSED", "a second clone ran the unchanged test again"
    with open(other / "harnesses" / "digest_probe_test.py", "a") as f:
        f.write("\n\ndef test_also_ran():\n    pass\n")
    assert _test(other, env, startup2) == "PASSED", "an edited test file gave a cached result"


def test_the_stable_interpreter_path_follows_the_installation(tmp_path, monkeypatch):
    """Two venvs share a stable path only when their installation is the same: the key
    moves with the installation digest and with any installed distribution's version, and
    the path is a link to the venv itself (not to a symlink that a deleted clone leaves)."""
    sys.path.insert(0, str(ROOT / "tools" / "bazel"))
    try:
        import stable_python
    finally:
        sys.path.remove(str(ROOT / "tools" / "bazel"))
    from importlib import metadata

    from farm.cache import key as digest

    base = stable_python.key()
    assert stable_python.key() == base
    real = digest.installation()

    class Other:
        digest = "0" * 64

    monkeypatch.setattr(digest, "installation", lambda: Other)
    assert stable_python.key() != base
    monkeypatch.setattr(digest, "installation", lambda: real)
    assert stable_python.key() == base

    dists = list(metadata.distributions())

    class Bumped:
        metadata = {"Name": dists[0].metadata["Name"]}
        version = dists[0].version + ".post1"

    monkeypatch.setattr(metadata, "distributions", lambda: [Bumped, *dists[1:]])
    assert stable_python.key() != base
    monkeypatch.undo()

    venv = tmp_path / "venv"
    venv.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(venv)
    py = stable_python.link(str(alias), home=str(tmp_path / "home"))
    assert py.endswith("/bin/python3") and os.path.realpath(Path(py).parent.parent) == str(venv.resolve())
    assert stable_python.link(str(alias), home=str(tmp_path / "home")) == py  # made again, same path
