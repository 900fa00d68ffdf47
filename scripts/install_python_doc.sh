#!/usr/bin/env bash
# Install the distractor corpus of the retrieval benchmark (benchmarks/retrieval.py): Debian's
# Python documentation, package `python3-doc` (HTML under /usr/share/doc/python3*/html).
#
# Usage: scripts/install_python_doc.sh
# Prints the HTML folder and does nothing else when it is already there. Otherwise it runs
# `apt-get install` (through sudo when not root). Without apt it says what to do instead and
# exits 1: the benchmark cannot build its haystack without the documentation (pass
# `--python-doc DIR` to benchmarks/retrieval.py to use another copy of the Python HTML docs).
set -euo pipefail

find_html() {
  local d
  for d in /usr/share/doc/python3-doc/html /usr/share/doc/python3*/html; do
    if [ -f "$d/index.html" ]; then
      readlink -f "$d"
      return 0
    fi
  done
  return 1
}

if html="$(find_html)"; then
  echo "$html"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_python_doc: apt-get is not available. Download the Python HTML documentation" \
       "(https://docs.python.org/3/download.html, 'HTML' archive), unpack it and pass its" \
       "folder to benchmarks/retrieval.py --python-doc DIR." >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install_python_doc: not root and no sudo; run 'apt-get install python3-doc' as root," \
         "or pass another copy of the Python HTML docs with --python-doc DIR." >&2
    exit 1
  fi
fi
echo "Installing python3-doc (Debian's Python HTML documentation) ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt_install() { "${SUDO[@]}" apt-get install -y -q --no-install-recommends python3-doc; }
# the package lists may be stale or absent (fresh containers): update them once and retry
if ! apt_install && ! { "${SUDO[@]}" apt-get update -q && apt_install; }; then
  echo "install_python_doc: apt-get could not install python3-doc; install it by hand or pass" \
       "another copy of the Python HTML docs to benchmarks/retrieval.py --python-doc DIR." >&2
  exit 1
fi
if html="$(find_html)"; then
  echo "$html"
  exit 0
fi
echo "install_python_doc: python3-doc is installed but no HTML folder was found under" \
     "/usr/share/doc/python3*/html; pass the folder to benchmarks/retrieval.py --python-doc DIR." >&2
exit 1
