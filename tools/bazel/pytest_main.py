"""Entry point for Bazel py_test targets that run pytest.

Usage (as a py_test `main`): pytest_main.py [pytest args...] e.g. a test file path
relative to the runfiles workspace root (the test's working directory).

- imports the project from the runfiles workspace root (farm/, harnesses/, workers/);
- writes JUnit XML to $XML_OUTPUT_FILE, disables pytest's cache provider;
- honours Bazel test sharding (TEST_SHARD_INDEX / TEST_TOTAL_SHARDS): keeps the
  collected tests whose index % total == shard, touches TEST_SHARD_STATUS_FILE;
- HOME / XDG_CACHE_HOME default to writable dirs under TEST_TMPDIR (jax needs them);
- maps pytest's exit code 5 (no tests collected, e.g. an empty shard) to 0.

Runs fine outside Bazel too: `python tools/bazel/pytest_main.py tools/bazel/family_test.py`.
"""

import os
import sys


def _workspace_root():
    """The runfiles workspace root under Bazel, else the source checkout root."""
    src_dir = os.environ.get("TEST_SRCDIR")
    ws = os.environ.get("TEST_WORKSPACE")
    if src_dir and ws:
        root = os.path.join(src_dir, ws)
        if os.path.isdir(root):
            return os.path.abspath(root)
    # Fallback: this file lives at <root>/tools/bazel/pytest_main.py (unresolved path).
    return os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def _setup_env():
    tmp = os.environ.get("TEST_TMPDIR")
    if tmp:
        home = os.environ.get("HOME")
        if not home or not os.path.isdir(home) or not os.access(home, os.W_OK):
            os.environ["HOME"] = os.path.join(tmp, "home")
        os.makedirs(os.environ["HOME"], exist_ok=True)
        os.environ.setdefault("XDG_CACHE_HOME", os.path.join(tmp, "cache"))
        os.makedirs(os.environ["XDG_CACHE_HOME"], exist_ok=True)
        os.environ.setdefault("TMPDIR", tmp)
    # Do not litter the runfiles tree (symlinks into the source tree) with .pyc files.
    sys.dont_write_bytecode = True
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")


class BazelShardingPlugin:
    """Keeps only this shard's tests: index % total == shard (stable collection order)."""

    def __init__(self, index, total):
        self.index = index
        self.total = total

    def pytest_collection_modifyitems(self, config, items):
        keep, drop = [], []
        for i, item in enumerate(items):
            (keep if i % self.total == self.index else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _sharding_plugin():
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "0") or 0)
    if total <= 1:
        return None
    index = int(os.environ.get("TEST_SHARD_INDEX", "0") or 0)
    status_file = os.environ.get("TEST_SHARD_STATUS_FILE")
    if status_file:
        # Tells Bazel this runner understands sharding.
        with open(status_file, "a"):
            pass
    return BazelShardingPlugin(index, total)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    _setup_env()

    root = _workspace_root()
    # Python put this script's (symlink-resolved, i.e. source-tree) directory first
    # on sys.path; drop it so everything is imported from the runfiles tree.
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if root not in sys.path:
        sys.path.insert(0, root)
    old_pp = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = root + (os.pathsep + old_pp if old_pp else "")

    import pytest  # after sys.path / env setup

    args = ["-p", "no:cacheprovider", "--rootdir", root]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append("--junitxml=" + xml)
    args += argv

    plugins = []
    shard = _sharding_plugin()
    if shard is not None:
        plugins.append(shard)

    code = int(pytest.main(args, plugins=plugins))
    if code == 5:  # no tests collected / all deselected (e.g. an empty shard)
        code = 0
    return code


if __name__ == "__main__":
    sys.exit(main())
