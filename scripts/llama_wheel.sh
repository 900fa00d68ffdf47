#!/usr/bin/env bash
# Build llama-cpp-python once into a wheelhouse keyed by version + build flags, then reuse it.
#
# Why: the default -march=native build of llama.cpp dies with SIGILL (AMX) on some CPUs, so we
# build with explicit flags. pip's own wheel cache ignores CMAKE_ARGS and could hand back a wheel
# built without them, so we never let pip cache it (--no-cache-dir) and keep our own wheelhouse.
#
# Usage: scripts/llama_wheel.sh PYTHON   -> prints the path of the wheelhouse directory
set -euo pipefail
PY="${1:-python3}"
VERSION="0.3.36"
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
PYTAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
KEY=$(printf '%s|%s|%s|%s' "$VERSION" "$FLAGS" "$PYTAG" "$(uname -m)" | sha256sum | cut -c1-12)
ROOT="${BATON_WHEELHOUSE:-$HOME/.cache/baton/wheels}"
DEST="$ROOT/llama-cpp-python-$VERSION-$KEY"
if ls "$DEST"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "$DEST"
  exit 0
fi
mkdir -p "$ROOT"
TMP=$(mktemp -d "$ROOT/.build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
echo "Building llama-cpp-python $VERSION (llama.cpp, CPU, portable AVX2 flags)." >&2
echo "This happens once per machine and takes 8-25 minutes on 2 cores; later runs reuse $DEST." >&2
CMAKE_ARGS="$FLAGS" FORCE_CMAKE=1 "$PY" -m pip wheel --no-deps --no-cache-dir \
  --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -w "$TMP" >&2
mkdir -p "$DEST.part"
mv "$TMP"/llama_cpp_python-*.whl "$DEST.part/"
mv "$DEST.part" "$DEST"
echo "$DEST"
