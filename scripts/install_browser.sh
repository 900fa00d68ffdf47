#!/usr/bin/env bash
# Install the headless browser the dashboard's browser tests drive: Debian's `chromium` and
# `chromium-driver` packages (no browser download at test time).
#
# Usage: scripts/install_browser.sh
# Does nothing when /usr/bin/chromium exists. Otherwise it runs `apt-get install` (through sudo
# when not root). When apt is not available or the install fails, it says so and exits 0: the
# rest of the suite still runs, and the browser tests skip (or fail under
# BATON_REQUIRE_SERVICES=1).
set -euo pipefail
CHROMIUM="${BATON_CHROMIUM:-/usr/bin/chromium}"

if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser: apt-get is not available; install chromium and chromium-driver" \
       "yourself to run the browser tests (they are skipped without it)." >&2
  exit 0
fi
SUDO=()
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install_browser: not root and no sudo; cannot install chromium (the browser tests" \
         "are skipped without it)." >&2
    exit 0
  fi
fi
echo "Installing chromium and chromium-driver (Debian packages) for the browser tests ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt_install() { "${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium chromium-driver; }
# the package lists may be stale or absent (fresh containers): update them once and retry
if ! apt_install && ! { "${SUDO[@]}" apt-get update -q && apt_install; }; then
  echo "install_browser: apt-get could not install chromium; the browser tests are skipped" \
       "(they fail under BATON_REQUIRE_SERVICES=1)." >&2
fi
exit 0
