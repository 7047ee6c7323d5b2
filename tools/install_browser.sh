#!/usr/bin/env bash
# Install Debian's chromium for the browser test (tests/test_browser.py drives it with Playwright for Python).
# Playwright's own browser download cannot work on the course's machines (no internet beyond the package
# mirrors); Debian's package can. Idempotent and quiet: does nothing when /usr/bin/chromium is already there.
#
#   bash tools/install_browser.sh          # as root, or with sudo available
set -euo pipefail

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [[ -x "$CHROMIUM" ]]; then
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
  else
    echo "install_browser.sh: $CHROMIUM is missing and this user cannot run apt-get (no root, no sudo);" \
         "the browser test will skip" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser.sh: no apt-get on this machine; install chromium by hand (the browser test will skip)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "install_browser.sh: installing chromium with apt-get (once)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { "${SUDO[@]}" apt-get update -qq && \
       "${SUDO[@]}" apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "install_browser.sh: apt-get failed (log above)" >&2
  exit 1
fi
if [[ ! -x "$CHROMIUM" ]]; then
  echo "install_browser.sh: apt-get installed chromium but $CHROMIUM is not there" >&2
  exit 1
fi
"$CHROMIUM" --version 2>/dev/null || true  # (Debian's launcher script may grumble about /dev/shm on stderr)
