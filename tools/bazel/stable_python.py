"""Print an interpreter path that is the same in every clone whose .venv holds the same install.

Bazel writes the Python interpreter's path into every py_test's launcher, so the launcher,
and with it every test's cache key, differs between two clones of the project
(`/work/main/.venv/bin/python3` against `/check/work/main/.venv/bin/python3`): a
`--disk_cache` shared between clones would never hit. The path printed here names the
installation instead of the clone:

    ~/.cache/lowering-farm/bazel-python/<key>/bin/python3

where ``<key>`` is a hash of the Python version, the installation digest (content hash of
jax, jaxlib, PJRT plugins, numpy/scipy/ml_dtypes: farm.cache.key.installation()) and every
installed distribution's name and version, and ``<key>`` is a symlink to this clone's
.venv (made again on every call, so it never points at a clone that is gone). Two clones
share a key only when what their .venv holds is the same, so a cached test result is
reused only for the same sources (Bazel's inputs) run on the same installation.

Called by //tools/bazel:venv_python.bzl at every Bazel server start:
``python tools/bazel/stable_python.py <venv dir>``.
"""
from __future__ import annotations

import hashlib
import os
import sys
from importlib import metadata

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def key() -> str:
    """What decides the installation a test runs on, hashed (the running interpreter's)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from farm.cache import key as digest  # noqa: E402  (the repository root on sys.path first)

    dists = sorted({f"{d.metadata['Name']}=={d.version}".lower() for d in metadata.distributions()})
    h = hashlib.sha256()
    for part in (sys.version, digest.installation().digest, *dists):
        h.update(part.encode() + b"\n")
    return h.hexdigest()[:20]


def link(venv: str, home: str | None = None) -> str:
    """Point ``<home>/.cache/lowering-farm/bazel-python/<key>`` at ``venv``; its python3's path."""
    base = os.path.join(home or os.path.expanduser("~"), ".cache", "lowering-farm", "bazel-python")
    os.makedirs(base, exist_ok=True)
    dest = os.path.join(base, key())
    tmp = f"{dest}.{os.getpid()}.tmp"
    os.symlink(os.path.realpath(venv), tmp)  # the venv itself: a symlink to it may be a clone's that goes
    os.replace(tmp, dest)  # atomic: a concurrent Bazel in another clone sees the old or the new link
    return os.path.join(dest, "bin", "python3")


if __name__ == "__main__":
    print(link(sys.argv[1]))
