#!/usr/bin/env bash
# Make Bazel usable offline on this machine (see shared/bazel-offline.md).
#   1. Debian's bazel-bootstrap (Bazel 4.2.3 at /usr/bin/bazel-4)
#   2. npm's @bazel/bazelisk as /usr/local/bin/bazel (honours .bazelversion)
#   3. pre-filled bazelisk cache so it finds 4.2.3 without downloading
# Idempotent and quick when everything is already in place. Called by `./dev setup`.
set -euo pipefail

BAZEL_VERSION="4.2.3"
BAZELISK_VERSION="1.28.1"
BAZEL_BIN="/usr/bin/bazel-4"

log() { echo "[bazel_setup] $*"; }

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

# 1. Bazel itself.
if [ ! -x "$BAZEL_BIN" ]; then
  log "installing bazel-bootstrap (Debian)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends bazel-bootstrap
fi
[ -x "$BAZEL_BIN" ] || { echo "[bazel_setup] $BAZEL_BIN still missing after install" >&2; exit 1; }

# Debian's own wrapper (/usr/bin/bazel) honours .bazelversion only through bazel-<version>.
if [ ! -e "/usr/bin/bazel-$BAZEL_VERSION" ]; then
  $SUDO ln -sf bazel-4 "/usr/bin/bazel-$BAZEL_VERSION" || true
fi

# 2. bazelisk launcher at /usr/local/bin/bazel (ahead of /usr/bin/bazel on PATH).
if ! readlink -f /usr/local/bin/bazel 2>/dev/null | grep -q bazelisk; then
  command -v npm >/dev/null 2>&1 || {
    log "installing npm (Debian)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
  }
  log "installing @bazel/bazelisk@$BAZELISK_VERSION (npm)"
  $SUDO npm install -g --silent --prefix /usr/local "@bazel/bazelisk@$BAZELISK_VERSION"
fi

# 3. Pre-fill bazelisk's cache: version $BAZEL_VERSION -> the local binary.
H="${BAZELISK_HOME:-$HOME/.cache/bazelisk}"
SHA="$(sha256sum "$BAZEL_BIN" | cut -d' ' -f1)"
META="$H/downloads/metadata/bazelbuild/bazel-$BAZEL_VERSION-linux-x86_64"
LINK="$H/downloads/sha256/$SHA/bin/bazel"
if [ "$(cat "$META" 2>/dev/null || true)" != "$SHA" ] || [ "$(readlink "$LINK" 2>/dev/null || true)" != "$BAZEL_BIN" ]; then
  log "pre-filling bazelisk cache in $H"
  mkdir -p "$(dirname "$META")" "$(dirname "$LINK")"
  printf '%s' "$SHA" > "$META"
  ln -sfn "$BAZEL_BIN" "$LINK"
fi

log "ok: $(command -v bazel) -> Bazel $BAZEL_VERSION ($BAZEL_BIN)"
