#!/usr/bin/env bash
# The top-up page test drives Debian's chromium (headless, through playwright-core); install the
# package when it is absent.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
echo "chromium not found; installing Debian's chromium package" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
test -x /usr/bin/chromium
