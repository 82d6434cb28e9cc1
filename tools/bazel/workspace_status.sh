#!/usr/bin/env bash
# Bazel --workspace_status_command (set in .bazelrc): runs at the start of every
# `bazel build/test/run`, with the user's environment, from the workspace root.
# Prints STABLE_FARM_INSTALL_DIGEST (content hash of the installed jax, jaxlib,
# plugins, numpy/scipy/ml_dtypes) for //tools/bazel:install_digest, an input of every
# harness family test: a changed installation re-runs them, an unchanged one keeps
# "(cached) PASSED". Fails (and so fails the build) rather than key nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="$ROOT/.venv/bin/python3"
if [ ! -x "$PY" ]; then
  echo "workspace_status.sh: $PY not found; run ./dev setup" >&2
  exit 1
fi
exec "$PY" "$ROOT/tools/bazel/install_digest.py" --workspace-status
