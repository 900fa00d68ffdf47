#!/usr/bin/env bash
# Build llama-cpp-python once into a wheelhouse keyed by version + build flags, then reuse it.
#
# Why: the default -march=native build of llama.cpp dies with SIGILL (AMX) on some CPUs, so we
# build with explicit flags. pip's own wheel cache ignores CMAKE_ARGS and could hand back a wheel
# built without them, so we never let pip cache it (--no-cache-dir) and keep our own wheelhouse
# (~/.cache/baton/wheels, or BATON_WHEELHOUSE). The work is done by
# src/baton/models/local/install.py, which `baton install-local-model` runs too.
#
# Usage: scripts/llama_wheel.sh PYTHON   -> prints the path of the wheelhouse directory
set -euo pipefail
PY="${1:-python3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
exec "$PY" "$ROOT/src/baton/models/local/install.py" --wheelhouse
