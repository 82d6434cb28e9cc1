"""A jax git checkout as a line of points to bisect, and each commit's jax as a directory.

jax is pure Python over a compiled jaxlib, so one commit's jax is its ``jax/`` tree put
first on ``PYTHONPATH`` over an installed jaxlib: ``git archive COMMIT jax`` unpacked once
per tree into ``$FARM_CACHE_DIR/jax-trees/<tree id>/jax`` (only ``jax/``: the checkout's
``jaxlib/`` sources must not shadow the installed jaxlib). The tree id (``git rev-parse
COMMIT:jax``) is a content hash of that directory, so it is also what the result cache keys
a commit's step by: two commits with the same ``jax/`` share one tree and one result.

The line is the first-parent history from the merge base of good and bad to bad: a
release tag sits on its release branch, a few commits off the main line, so the merge
base stands for it (and is checked good like any good end).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from farm.errors import ConfigError, FarmError

#: Where the step's files of interest live (the answer lists the files a commit touched here).
SOURCES = "jax/_src"


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:10]


def git(repo: str | Path, *args: str) -> str:
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise FarmError(f"git {' '.join(args[:2])} in {repo}: {p.stderr.strip().splitlines()[-1:] or p.returncode}")
    return p.stdout


def check_repo(repo: str | Path) -> Path:
    path = Path(repo)
    p = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, text=True)
    if not path.exists() or p.returncode != 0:
        raise ConfigError(f"--jax-repo {repo}: not a git checkout of jax")
    return path


def resolve(repo: str | Path, ref: str, flag: str) -> str:
    """A ref (hash, tag, branch) → its full commit hash; one line naming ``flag`` if it does not exist."""
    p = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                       capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        raise ConfigError(f"{flag} {ref}: no such commit in {repo}")
    return p.stdout.strip()


def line(repo: str | Path, good: str, bad: str) -> list[Commit]:
    """The commits to bisect, oldest first: the merge base of good and bad, then bad's
    first-parent history down to it. Good and bad must differ and bad must not come before good."""
    if good == bad:
        raise ConfigError(f"--good and --bad are the same commit ({good[:10]}): nothing to bisect")
    base = git(repo, "merge-base", good, bad).strip()
    if not base:
        raise ConfigError(f"--good {good[:10]} and --bad {bad[:10]} share no history")
    if base == bad:
        raise ConfigError(f"--bad {bad[:10]} comes before --good {good[:10]}: swap them")
    out = git(repo, "log", "--first-parent", "--format=%H%x00%s", f"{base}..{bad}")
    commits = [Commit(*ln.split("\0", 1)) for ln in out.splitlines() if ln]
    commits.reverse()
    if not commits or commits[-1].sha != bad:
        raise ConfigError(f"--bad {bad[:10]} is not on a first-parent line from {base[:10]}")
    subject = git(repo, "log", "-1", "--format=%s", base).strip()
    return [Commit(base, subject), *commits]


def touched(repo: str | Path, sha: str, under: str = SOURCES) -> list[str]:
    """The files a commit changed under ``under`` (against its first parent)."""
    out = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "-m", "--first-parent", "--root", sha,
              "--", under)
    return sorted(set(out.split()))


def tree_id(repo: str | Path, sha: str) -> str | None:
    p = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{sha}:jax"],
                       capture_output=True, text=True)
    return p.stdout.strip() or None


def materialize(repo: str | Path, sha: str, root: Path) -> Path:
    """The directory to put on ``PYTHONPATH`` for the jax of ``sha`` (unpacked once per tree).

    A new tree starts as a hard-linked copy of the last one unpacked, bytecode included, and
    only the files that differ are rewritten (their bytecode removed): importing a commit's
    jax then compiles only what changed since the previous step, not all of jax."""
    tid = tree_id(repo, sha)
    if tid is None:
        raise FarmError(f"commit {sha[:10]} has no jax/ directory")
    home = root / tid
    if (home / "jax" / "__init__.py").exists():
        return home
    root.mkdir(parents=True, exist_ok=True)
    last = root / ".last"
    base = root / last.read_text().strip() if last.exists() else None
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{tid[:8]}-"))
    try:
        if base is not None and (base / "jax" / "__init__.py").exists() and _has_tree(repo, base.name):
            subprocess.run(["cp", "-al", str(base / "jax"), str(tmp / "jax")], check=True)
            changed = _apply_diff(repo, base.name, tid, tmp / "jax")
        else:
            changed = None
        if changed is None:
            shutil.rmtree(tmp / "jax", ignore_errors=True)
            _unpack(repo, tid, [], tmp / "jax")
        try:
            os.rename(tmp, home)
        except OSError:  # another process unpacked the same tree meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    last.write_text(tid + "\n")
    return home


def _has_tree(repo: str | Path, tree: str) -> bool:
    """Whether ``repo`` has tree ``tree`` (the cache is shared by every checkout)."""
    return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{tree}^{{tree}}"],
                          capture_output=True).returncode == 0


def _unpack(repo: str | Path, tree: str, paths: list[str], into: Path) -> None:
    """``git archive`` of ``tree`` (only ``paths`` if given) unpacked into ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as f:
        subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", tree, *paths], stdout=f, check=True)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(into, filter="data")


def _apply_diff(repo: str | Path, old: str, new: str, into: Path) -> int | None:
    """Turn a hard-linked copy of tree ``old`` into tree ``new``: every changed path is
    unlinked (never written through: the link is shared with ``old``'s copy), with its
    bytecode, then the new content unpacked. The number of paths changed (None: too many
    to be worth it, unpack the whole tree)."""
    out = git(repo, "diff-tree", "-r", "--no-renames", "--name-status", "-z", old, new)
    parts = out.split("\0")
    entries = [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
    if len(entries) > 2000:
        return None
    write = []
    for status, path in entries:
        target = into / path
        for p in [target, *target.parent.joinpath("__pycache__").glob(f"{target.stem}.*.pyc")]:
            if p.is_symlink() or p.is_file():
                p.unlink()
        if status != "D":
            write.append(path)
    for i in range(0, len(write), 500):
        _unpack(repo, new, write[i:i + 500], into)
    return len(entries)


def _dotted(v: str) -> tuple[int, ...]:
    """A version's dotted numeric prefix, as jax's own jaxlib check reads it (0.9.0.1 → (0, 9, 0, 1))."""
    m = re.match(r"[0-9]+(?:\.[0-9]+)*", v)
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def imports_with(repo: str | Path, shas: list[str], jaxlib: str) -> list[bool]:
    """Whether each commit's jax passes jax's own import-time jaxlib check for ``jaxlib``
    (``jax/_src/lib``: minimum jaxlib <= jaxlib <= jax's version), read from each commit's
    ``jax/version.py`` without importing it (one blob per distinct file)."""
    p = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-check"], input="".join(
        f"{s}:jax/version.py\n" for s in shas), capture_output=True, text=True, check=True)
    blobs = [None if ln.endswith(" missing") else ln.split()[0] for ln in p.stdout.splitlines()]
    verdict: dict[str, bool] = {}
    lib = _dotted(jaxlib)
    for blob in set(filter(None, blobs)):
        text = git(repo, "cat-file", "-p", blob)
        ver = re.search(r"^_version\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
        low = re.search(r"^_minimum_jaxlib_version\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
        verdict[blob] = bool(ver and low and _dotted(low.group(1)) <= lib <= _dotted(ver.group(1)))
    return [verdict.get(b, False) if b else False for b in blobs]
