#!/usr/bin/env bash
# The demo and the tests start their own redis-server; install Debian's package when it is absent.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 || [ -n "${REDIS_URL:-}" ]; then exit 0; fi
echo "redis-server not found; installing Debian's redis-server package" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
# Debian's package starts a system service; the project never uses it, it runs its own.
command -v redis-server >/dev/null
