"""A virtual environment per jax version, provisioned from the package index and cached
(``$FARM_CACHE_DIR/jax-envs/jax-V``, default ``~/.cache/lowering-farm``), and the standalone
worker run inside one: what ``farm sweep --jax``, ``farm bisect`` over releases and the
cross-version matrix (``farm.run.versions.matrix``) run each version in. Version strings are
checked and ordered numerically here (``parse``, ``key``).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from farm.errors import ConfigError, FarmError

ROOT = Path(__file__).resolve().parents[3]
#: What a version's environment gets besides jax and jaxlib: the same pins as .venv
#: (requirements.txt), so only jax differs between the versions of one sweep.
COMPANIONS = ("numpy", "scipy", "flatbuffers", "absl-py", "ml_dtypes", "packaging")
#: The oldest jax the farm runs on (measured: docs/versions.md): the sharding harnesses name
#: jax.sharding.AxisType, which 0.5.0 and 0.5.1 call AxisTypes, and the catalog loads whole.
OLDEST_SUPPORTED = "0.5.3"
_VERSION = re.compile(r"\d+\.\d+\.\d+(\.\d+)?")

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def key(version: str) -> tuple[int, ...]:
    """Sort key: numeric, so 0.10.2 comes after 0.9.2."""
    return tuple(int(x) for x in version.split("."))


def parse(text: str) -> list[str]:
    """``0.8.3,0.9.2,0.10.2`` → the versions, checked (format, oldest supported, no repeats), sorted."""
    out: list[str] = []
    for v in (x.strip() for x in text.split(",") if x.strip()):
        if not _VERSION.fullmatch(v):
            raise ConfigError(f"--jax: {v!r} is not a jax version (e.g. 0.9.2)")
        if key(v) < key(OLDEST_SUPPORTED):
            raise ConfigError(f"--jax: {v} is older than the oldest supported jax, {OLDEST_SUPPORTED} "
                              "(docs/versions.md says why)")
        if v in out:
            raise ConfigError(f"--jax: {v} given twice")
        out.append(v)
    if not out:
        raise ConfigError("--jax: name at least one version, e.g. --jax 0.9.2,0.10.2")
    return sorted(out, key=key)


def installed() -> str | None:
    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class JaxEnv:
    """A Python that has one jax version: its interpreter and how it was had."""

    version: str
    python: str
    seconds: float
    how: str  # "this environment", "cached" or "provisioned"


def cache_root() -> Path:
    return Path(os.environ.get("FARM_CACHE_DIR") or Path.home() / ".cache" / "lowering-farm")


def requirements(version: str) -> list[str]:
    """jax and jaxlib at ``version``, the companions at this checkout's pins."""
    pins: dict[str, str] = {}
    req = ROOT / "requirements.txt"
    if req.exists():
        for line in req.read_text().splitlines():
            m = re.match(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==(\S+)", line.strip())
            if m:
                pins[m.group(1).lower().replace("_", "-")] = m.group(3)
    reqs = [f"jax=={version}", f"jaxlib=={version}"]
    for name in COMPANIONS:
        pin = pins.get(name.lower().replace("_", "-"))
        reqs.append(f"{name}=={pin}" if pin else name)
    return reqs


def provision(version: str, log: Log = _stderr) -> JaxEnv:
    """A Python with jax ``version``: this one if it has it, else a cached venv, else a new
    venv from the package index. A venv is reused only when its marker names exactly the
    requirements it would be made with (a changed pin makes a new one)."""
    t0 = time.monotonic()
    if installed() == version:
        return JaxEnv(version, sys.executable, time.monotonic() - t0, "this environment")
    reqs = requirements(version)
    digest = hashlib.sha256(json.dumps(reqs).encode()).hexdigest()[:16]
    home = cache_root() / "jax-envs" / f"jax-{version}"
    python = home / "bin" / "python"
    marker = home / ".farm-env"
    if python.exists() and marker.exists() and marker.read_text().strip() == digest:
        return JaxEnv(version, str(python), time.monotonic() - t0, "cached")
    log(f"farm: provisioning jax {version} in {home} (pip; first time about 20 s)")
    p = None
    for interpreter in interpreters():  # this Python first; a newer one for a jax that requires it
        subprocess.run([interpreter, "-m", "venv", "--clear", str(home)], check=True, capture_output=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        p = subprocess.run(pip + reqs, capture_output=True, text=True)
        if p.returncode != 0 and "Requires-Python" not in p.stderr:  # the pins may not suit an older jax
            p = subprocess.run(pip + [f"jax=={version}", f"jaxlib=={version}", *COMPANIONS], capture_output=True,
                               text=True)
        if p.returncode == 0 or "Requires-Python" not in p.stderr:
            break
    if p is None or p.returncode != 0:
        tail = " ".join((p.stderr or p.stdout).strip().splitlines()[-2:]) if p else "no Python found"
        raise FarmError(f"jax {version}: pip could not install it: {tail}")
    marker.write_text(digest + "\n")
    return JaxEnv(version, str(python), time.monotonic() - t0, "provisioned")


def interpreters() -> list[str]:
    """Pythons to make a version's venv with: this one, then newer ones on PATH (jax 0.11 and
    later require Python 3.12)."""
    out = [sys.executable]
    for minor in range(sys.version_info.minor + 1, 15):
        found = [shutil.which(f"python3.{minor}"),
                 *sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / f"3.{minor}.*" / "bin" / f"python3.{minor}")))]
        for cand in filter(None, found):  # a pyenv shim may exist and not run: try it
            if subprocess.run([cand, "-c", "import venv"], capture_output=True).returncode == 0:
                out.append(cand)
                break
    return out


def run_jobs(env: JaxEnv, jobs: dict[str, Any], workdir: Path, label: str, workers: int,
             log: Log = _stderr) -> list[str]:
    """Write ``jobs`` and run them with the standalone worker in ``env``; the bundle paths.

    The bundle path is stable per label, so a sweep interrupted here resumes from the
    worker's journal instead of starting over."""
    workdir.mkdir(parents=True, exist_ok=True)
    jobs_path, out = workdir / f"{label}.jobs.json", workdir / f"{label}.json.gz"
    jobs_path.write_text(json.dumps(jobs))
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [env.python, "-m", "farm", "worker", "--standalone", "--jobs", str(jobs_path), "--out", str(out),
           "--workers", str(workers)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True)
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-6:])
        raise FarmError(f"jax {env.version}: the standalone worker failed ({label}, exit {p.returncode}):\n{tail}")
    log(f"farm: {label}: {p.stdout.strip().splitlines()[-1] if p.stdout.strip() else 'done'} "
        f"({time.monotonic() - t0:.0f} s wall)")
    jobs_path.unlink()
    return sorted(glob.glob(str(out))) or sorted(glob.glob(str(out).replace(".json.gz", "-*.json.gz")))
