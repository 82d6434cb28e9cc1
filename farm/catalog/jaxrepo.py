"""A file of a jax git checkout (or bare mirror) at the installed jax's release tag, imported.

JAX's test suites are not in the wheel: ``tests/shape_poly_test.py`` lives in jax's
repository at each release tag. The file is read with ``git show TAG:PATH`` into a
temporary directory (kept while the process lives: fingerprints hash the harnesses'
source lines through ``linecache``) and imported from there; nothing is copied into this
repository. The tag is the installed jax's (``jax-v{version}``), so the harnesses are the
ones written for the jax that runs them.
"""
from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from farm.errors import BadJaxRepo

#: Files ``load`` imported (real paths). The result cache treats them like the farm's own
#: harness family modules: what each of their harnesses runs is in that harness's digest
#: (its function's source; the module's name carries the file's git blob id), so a
#: driver that loaded a jax test file (``--catalog shape_poly``, or a test that did)
#: and a worker that never did compute the same loaded-module digest
#: (``farm.cache.hermetic``).
LOADED_FILES: set[str] = set()


@dataclass(frozen=True, slots=True)
class Source:
    """One file of a jax repository at a tag: where it came from and its text."""

    repo: str
    tag: str
    path: str
    blob: str  # git's object id of the file: what the harnesses were read from
    text: str


def installed_tag() -> str:
    """The release tag of the installed jax, e.g. ``jax-v0.10.2``."""
    return f"jax-v{importlib.metadata.version('jax')}"


def _git(repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)


def read(repo: str, path: str, tag: str | None = None) -> Source:
    """``path`` at ``tag`` (the installed jax's) of ``repo``; ``BadJaxRepo`` (one line) when the
    repository, the tag or the file is not there."""
    tag = tag or installed_tag()
    if not Path(repo).is_dir() or _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise BadJaxRepo(f"--jax-repo {repo}: not a git repository (a jax checkout or bare mirror)")
    if _git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}").returncode != 0:
        raise BadJaxRepo(f"--jax-repo {repo}: no tag {tag} (the installed jax's release); fetch the tags")
    blob = _git(repo, "rev-parse", "--verify", "--quiet", f"{tag}:{path}")
    if blob.returncode != 0:
        raise BadJaxRepo(f"--jax-repo {repo}: no {path} at {tag}")
    shown = _git(repo, "show", f"{tag}:{path}")
    if shown.returncode != 0:
        raise BadJaxRepo(f"--jax-repo {repo}: git show {tag}:{path} failed: {shown.stderr.strip()[:200]}")
    return Source(str(Path(repo).resolve()), tag, path, blob.stdout.strip(), shown.stdout)


def load(src: Source, name: str) -> ModuleType:
    """Import ``src`` as module ``name`` from a temporary directory, with absl's flags marked
    parsed (jax's test modules parse them at import; our argv is not theirs)."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    tmp = Path(tempfile.mkdtemp(prefix="farm-jaxrepo-"))
    atexit.register(shutil.rmtree, tmp, True)
    file = tmp / Path(src.path).name
    file.write_text(src.text)
    LOADED_FILES.add(os.path.realpath(file))
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[name]
        raise BadJaxRepo(f"--jax-repo {src.repo}: {src.tag}:{src.path} does not import with the installed jax: "
                         f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
    return mod
