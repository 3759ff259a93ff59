#!/usr/bin/env bash
# What the benchmark needs beside the gateway's own dependencies: Debian's wrk (the buffered load)
# and, in bench/ only, the peer gateway from npm. Never installed into the gateway itself.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v wrk >/dev/null 2>&1; then
  echo "wrk not found; installing Debian's wrk package" >&2
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null
fi
if [ ! -f node_modules/@portkey-ai/gateway/package.json ]; then
  # --ignore-scripts: the peer's postinstall (patch-package) is for its own repository, not for users.
  npm install --no-audit --no-fund --ignore-scripts
fi
bash ../scripts/ensure-redis-server.sh
