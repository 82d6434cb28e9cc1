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


#: Names a version list may hold instead of a number, resolved against the package index when
#: parsed: a nightly schedule that says ``jax = ["previous", "newest"]`` follows the releases.
ALIASES = ("newest", "previous")
#: Where the releases of jax and jaxlib are read (PyPI's JSON API; FARM_PYPI_URL for a mirror).
_INDEX = "https://pypi.org/pypi"
#: The most of one package's JSON the index may send (jax's is about 0.2 MiB).
_MAX_INDEX_BYTES = 16 * 2**20


def parse(text: str, releases: Callable[[], list[str]] | None = None) -> list[str]:
    """``0.8.3,0.9.2,0.10.2`` → the versions, checked (format, oldest supported, no repeats), sorted.
    ``newest`` and ``previous`` name releases (``pick``): ``releases`` lists them (default: the
    package index, read once per process)."""
    out: list[str] = []
    for v in (x.strip() for x in text.split(",") if x.strip()):
        if v in ALIASES:
            v = pick(v, (releases or published)())
        if not _VERSION.fullmatch(v):
            raise ConfigError(f"--jax: {v!r} is not a jax version (e.g. 0.9.2, or newest, previous)")
        if key(v) < key(OLDEST_SUPPORTED):
            raise ConfigError(f"--jax: {v} is older than the oldest supported jax, {OLDEST_SUPPORTED} "
                              "(docs/versions.md says why)")
        if v in out:
            raise ConfigError(f"--jax: {v} given twice")
        out.append(v)
    if not out:
        raise ConfigError("--jax: name at least one version, e.g. --jax 0.9.2,0.10.2")
    return sorted(out, key=key)


def pick(alias: str, releases: list[str]) -> str:
    """``newest``: the highest release; ``previous``: the highest of an older minor line (after
    0.12.0.1 comes 0.11.x, not 0.12.0: what a release changed is measured against the last line)."""
    ordered = sorted((v for v in releases if _VERSION.fullmatch(v)), key=key)
    if not ordered:
        raise ConfigError(f"--jax {alias}: the package index lists no jax release")
    newest = ordered[-1]
    if alias == "newest":
        return newest
    older = [v for v in ordered if key(v)[:2] < key(newest)[:2]]
    if not older:
        raise ConfigError(f"--jax previous: no release older than the {'.'.join(newest.split('.')[:2])} line")
    return older[-1]


_published: list[str] | None = None


def published() -> list[str]:
    """Every final release that has both a jax and a jaxlib of the same number (yanked ones
    left out), from the package index; a clear error when it cannot be read."""
    global _published
    if _published is None:
        import urllib.request

        base = os.environ.get("FARM_PYPI_URL") or _INDEX
        found = []
        for name in ("jax", "jaxlib"):
            def bad(why: str) -> ConfigError:
                return ConfigError(f"--jax newest/previous: cannot read {name}'s releases from {base} ({why}); "
                                   "name the versions instead")
            try:
                with urllib.request.urlopen(f"{base}/{name}/json", timeout=30) as r:
                    body = r.read(_MAX_INDEX_BYTES + 1)
                if len(body) > _MAX_INDEX_BYTES:
                    raise bad(f"the answer is over {_MAX_INDEX_BYTES // 2**20} MiB")
                data = json.loads(body)
            except (OSError, ValueError) as e:
                raise bad(str(e)) from None
            releases = data.get("releases") if isinstance(data, dict) else None
            if not isinstance(releases, dict):
                raise bad("no 'releases' table in the answer")
            found.append({v for v, files in releases.items()
                          if _VERSION.fullmatch(str(v)) and isinstance(files, list) and files
                          and not all(isinstance(f, dict) and f.get("yanked") for f in files)})
        _published = sorted(found[0] & found[1], key=key)
    return _published


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
