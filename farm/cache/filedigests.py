"""sha256 of files, memoized by path, size and mtime in memory and on disk (shared by
every process on the host), so checking unchanged files costs a stat each."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def walk_files(root: str, skip: Iterable[str] = ("__pycache__",)) -> list[str]:
    """Every file under ``root``, relative and sorted: no bytecode, no directory named in ``skip``."""
    skip = set(skip)
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        out += [os.path.relpath(os.path.join(dirpath, n), root) for n in filenames if not n.endswith((".pyc", ".pyo"))]
    return sorted(out)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (several processes may write it at once);
    OSError where its directory cannot be made or written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class JsonMemo:
    """A dict memo kept in a JSON file beside the others (``XDG_CACHE_HOME/lowering-farm``),
    read on first use and written back atomically: several workers may do it at once, and
    a read-only home only makes the next process slower."""

    def __init__(self, path: Path | None, env: str, name: str) -> None:
        self.path = path or Path(os.environ.get(env) or Path(os.environ.get("XDG_CACHE_HOME") or
                                                             Path.home() / ".cache") / "lowering-farm" / name)
        self._memo: dict[str, Any] | None = None
        self._dirty = False
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        if self._memo is None:
            try:
                self._memo = json.loads(self.path.read_text())
            except (OSError, ValueError):
                self._memo = {}
        return self._memo

    def save(self) -> None:
        """Write the memo back (atomically: several workers may do this at once)."""
        if not self._dirty or self._memo is None:
            return
        try:
            atomic_write(self.path, json.dumps(self._memo).encode())
            self._dirty = False
        except OSError:
            pass  # a read-only home: the memo is only a speed-up


class FileDigests(JsonMemo):
    """sha256 of files, memoized by (size, mtime_ns) in memory and in a JSON file."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(path, "FARM_DIGEST_CACHE", "file-digests.json")
        self.hashed_bytes = 0

    def sha(self, path: str, st: os.stat_result | None = None) -> str:
        st = st or os.stat(path)
        memo = self._load()
        hit = memo.get(path)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return hit[2]
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        self.hashed_bytes += st.st_size
        with self._lock:
            memo[path] = [st.st_size, st.st_mtime_ns, h.hexdigest()]
            self._dirty = True
        return memo[path][2]

    def tree(self, root: str | Path, skip: Iterable[str] = ("__pycache__",)) -> str:
        """Digest of every file under ``root`` (relative paths and contents; no bytecode
        caches, no directory named in ``skip``)."""
        root = str(root)
        h = hashlib.sha256()
        if os.path.isfile(root):
            h.update(self.sha(root).encode())
            return h.hexdigest()
        entries: list[tuple[str, str]] = []
        for rel in walk_files(root, skip):
            p = os.path.join(root, rel)
            try:
                st = os.stat(p)
            except OSError:
                continue  # a dangling link
            entries.append((rel, self.sha(p, st)))
        for rel, sha in sorted(entries):
            h.update(f"{rel}\0{sha}\n".encode())
        return h.hexdigest()
