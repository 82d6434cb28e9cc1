"""Print the installation digest (farm.cache.key.installation()) for Bazel.

    .venv/bin/python tools/bazel/install_digest.py                # the digest
    .venv/bin/python tools/bazel/install_digest.py --json         # digest, parts, seconds
    .venv/bin/python tools/bazel/install_digest.py --workspace-status

The digest is a content hash of the installed jax, jaxlib, PJRT plugins and
numpy/scipy/ml_dtypes (file hashes memoized on disk by path, size and mtime, so a warm
call costs a directory walk). ``--workspace-status`` prints the lines Bazel's
``--workspace_status_command`` expects (see tools/bazel/workspace_status.sh and
.bazelrc): ``STABLE_FARM_INSTALL_DIGEST`` and ``STABLE_FARM_PYTHON``. The
//tools/bazel:install_digest target extracts them into a file every harness family
test depends on, so a changed installation re-runs the tests.
"""
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from farm.cache import key as digest  # noqa: E402  (needs the repository root on sys.path)

    inst = digest.installation()
    if "--json" in argv:
        print(json.dumps(inst.to_dict(), indent=2, sort_keys=True))
    elif "--workspace-status" in argv:
        print("STABLE_FARM_INSTALL_DIGEST", inst.digest)
        print("STABLE_FARM_PYTHON", sys.version.split()[0])
    else:
        print(inst.digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
