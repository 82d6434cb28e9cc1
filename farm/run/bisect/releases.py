"""The released jax versions as a line of bisection points (``farm bisect --good 0.8.3 --bad 0.9.2``).

``paired``: each release in its provisioned venv (``farm.run.versions.venvs``), jax and jaxlib of
that version; ``fixed``: each release's jax wheel, unpacked once, over this environment's
jaxlib. ``--index-url`` (a nightly wheel index) is where the versions, the wheels and the
venvs come from. ``release_commit`` maps a release to the jax commit it was built from, for
the bisection to go on inside the commits.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from farm.errors import ConfigError, FarmError
from farm.run.bisect import jaxgit
from farm.run.bisect.steps import Point, Prepared, environment_digest
from farm.run.versions import venvs

Log = Callable[[str], None]


_RELEASE = re.compile(r"\d+\.\d+\.\d+(\.\d+)?([a-z]+\d*)?(\.dev\d+)?")


def is_release(ref: str) -> bool:
    return bool(_RELEASE.fullmatch(ref))


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def index_versions(index_url: str | None = None, pythons: list[str] | None = None) -> list[str]:
    """jax versions the package index offers (to any of ``pythons``: jax 0.11 needs Python 3.12)."""
    found: set[str] = set()
    for py in pythons or venvs.interpreters():
        cmd = [py, "-m", "pip", "index", "versions", "jax", "--disable-pip-version-check"]
        if index_url:
            cmd += ["--index-url", index_url, "--pre"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        m = re.search(r"Available versions:\s*(.*)", p.stdout)
        if m:
            found.update(v.strip() for v in m.group(1).split(",") if v.strip())
    return sorted(found, key=_vkey)


def _vkey(v: str) -> tuple[Any, ...]:
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.]", re.sub(r"[a-z]+", ".", v)) if x)


def release_line(good: str, bad: str, available: list[str]) -> list[str]:
    for flag, v in (("--good", good), ("--bad", bad)):
        if v not in available:
            near = ", ".join(available[-6:])
            raise ConfigError(f"{flag} {v}: no such jax release on the package index (newest: {near})")
    if good == bad:
        raise ConfigError(f"--good and --bad are the same release ({good}): nothing to bisect")
    if _vkey(bad) < _vkey(good):
        raise ConfigError(f"--bad {bad} is older than --good {good}: swap them")
    if _vkey(good) < venvs.key(venvs.OLDEST_SUPPORTED):
        raise ConfigError(f"--good {good} is older than the oldest supported jax, {venvs.OLDEST_SUPPORTED}")
    return [v for v in available if _vkey(good) <= _vkey(v) <= _vkey(bad)]


def release_points(line: list[str], jaxlib: str, log: Log, index_url: str | None = None) -> list[Point]:
    """``paired``: each release in its own venv (jax and jaxlib of that version); ``fixed``:
    each release's jax wheel over this environment's jaxlib."""
    base_env: list[dict[str, Any]] = []

    def paired(v: str) -> Callable[[], Prepared]:
        def go() -> Prepared:
            with _index(index_url):
                env = venvs.provision(v, log)
            return Prepared(env.python, None, json.dumps({"installation": environment_digest(env.python)["digest"]}))
        return go

    def fixed(v: str) -> Callable[[], Prepared]:
        def go() -> Prepared:
            if not base_env:
                base_env.append(environment_digest(sys.executable))
            home, sha = _wheel_tree(v, index_url)
            return Prepared(sys.executable, str(home), json.dumps({"wheel": sha, "compiler": base_env[0]["compiler"],
                                                                  "reference": base_env[0]["reference"]}))
        return go

    make = paired if jaxlib == "paired" else fixed
    return [Point(v, make(v)) for v in line]


@contextlib.contextmanager
def _index(index_url: str | None) -> Iterator[None]:
    """pip (which ``venvs.provision`` runs) reads ``--index-url`` from its environment:
    set while a release from that index (pre-releases included, as nightlies are) is provisioned."""
    saved = {k: os.environ.get(k) for k in ("PIP_INDEX_URL", "PIP_PRE")}
    if index_url:
        os.environ.update(PIP_INDEX_URL=index_url, PIP_PRE="1")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _wheel_tree(version: str, index_url: str | None) -> tuple[Path, str]:
    """jax ``version``'s wheel, unpacked once (its ``jax/`` only) under the cache."""
    home = venvs.cache_root() / "jax-wheels" / version
    if not (home / "jax" / "__init__.py").exists():
        dl = home.parent / ".downloads"
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
               "--python-version", "3.12", "-d", str(dl), f"jax=={version}"]
        if index_url:
            cmd += ["--index-url", index_url, "--pre"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise FarmError(f"jax {version}: pip could not download its wheel: {p.stderr.strip().splitlines()[-1:]}")
        whl = next(dl.glob(f"jax-{version}-*.whl"))
        with zipfile.ZipFile(whl) as z:
            z.extractall(home, [n for n in z.namelist() if n.startswith("jax/")])
        (home / ".wheel-sha256").write_text(hashlib.sha256(whl.read_bytes()).hexdigest())
    return home, (home / ".wheel-sha256").read_text().strip()


def wheel_hash(version: str, jaxlib: str, log: Log = _stderr) -> str | None:
    """The ``_git_hash`` a release's ``jax/version.py`` records (read from its venv, or its
    unpacked wheel, without importing jax)."""
    if jaxlib == "paired":
        code = "import importlib.util as u; print(u.find_spec('jax').origin)"
        p = subprocess.run([venvs.provision(version, log).python, "-c", code], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin"})
        vf = Path(p.stdout.strip()).parent / "version.py" if p.returncode == 0 else None
    else:
        vf = venvs.cache_root() / "jax-wheels" / version / "jax" / "version.py"
    m = re.search(r"_git_hash: str = '([0-9a-f]{40})'", vf.read_text()) if vf is not None and vf.exists() else None
    return m.group(1) if m else None


def release_commit(repo: str | Path, version: str, jaxlib: str, log: Log) -> str | None:
    """The jax commit a release was built from: the one its wheel names when the repository
    has it, else the tag ``jax-vVERSION``."""
    sha = wheel_hash(version, jaxlib, log)
    if sha and jaxgit.tree_id(repo, sha):
        return sha
    try:
        return jaxgit.resolve(repo, f"jax-v{version}", "--jax-repo tag")
    except ConfigError:
        return None
