"""A jax git history built from the installed jax sources, for bisection tests.

Commit 0 is the installed ``jax/`` package as it is; then ``n`` commits, each writing a
counter into a new module ``jax/_src/_history_note.py`` (imported by nothing: a no-op for
jax), except: the commits in ``broken`` make ``import jax`` fail at once (the next commit repairs
it), and commit ``sin_at`` changes the ``sin`` lowering rule to emit a cosine. Plain git,
no jax import: building 45 commits takes about a second.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

SIN_RULE = "return _nary_lower_hlo(hlo.sine, ctx, x, accuracy=accuracy)"
SIN_BROKEN = "return _nary_lower_hlo(hlo.cosine, ctx, x, accuracy=accuracy)"
BREAK = "raise ImportError('synthetic history: this commit does not import')\n"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def build(repo: Path, n: int, sin_at: int, broken: tuple[int, ...] = ()) -> list[str]:
    """Build the history in ``repo``; the commit hashes, oldest (the installed jax) first."""
    src = Path(importlib.util.find_spec("jax").origin).parent
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    shutil.copytree(src, repo / "jax", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    lax = repo / "jax" / "_src" / "lax" / "lax.py"
    init = repo / "jax" / "__init__.py"
    assert SIN_RULE in lax.read_text(), "the installed jax's sin lowering rule moved: update SIN_RULE"
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base: the installed jax")
    shas = [_git(repo, "rev-parse", "HEAD").strip()]
    clean_init = init.read_text()
    for i in range(1, n + 1):
        (repo / "jax" / "_src" / "_history_note.py").write_text(f"STEP = {i}\n")
        subject = f"note {i}"
        init.write_text((BREAK if i in broken else "") + clean_init)
        if i in broken:
            subject = f"break import {i}"
        if i == sin_at:
            lax.write_text(lax.read_text().replace(SIN_RULE, SIN_BROKEN))
            subject = "lax: lower sin through the cosine rule"
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", subject)
        shas.append(_git(repo, "rev-parse", "HEAD").strip())
    return shas
