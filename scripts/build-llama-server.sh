#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the source vendored in the same
# llama-cpp-python sdist the embedded narrator is built from, with the same
# portable flags as scripts/build-llama.sh (any x86-64 with AVX2; no AVX-512,
# no AMX, nothing picked from the building CPU).
#
# Why: the real-server tests (tests/providers/test_real_llama_server.py,
# marked realserver) and the compare evidence drive a real llama.cpp server.
# Building it from the vendored tree means the server and the embedded model
# are the same llama.cpp revision. The binary is never committed.
#
# Usage: scripts/build-llama-server.sh [DEST]   (default /work/llama-server)
# Then:  STORY_LLAMA_SERVER=DEST/llama-server pytest -m realserver
set -euo pipefail
source "$(dirname "$0")/llama-flags.sh"
VERSION=$LLAMA_VERSION
DEST=${1:-/work/llama-server}
JOBS=${JOBS:-2}
PY=${PYTHON:-python3}
FLAGS="$LLAMA_FLAGS -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
-DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release"

if [ -x "$DEST/llama-server" ] && "$DEST/llama-server" --version >/dev/null 2>&1; then
  echo "llama-server already built: $DEST/llama-server"
  exit 0
fi
WORK=${LLAMA_BUILD_DIR:-${TMPDIR:-/tmp}/llama-server-build-$VERSION}
mkdir -p "$WORK"
cd "$WORK"
if ! ls llama_cpp_python-$VERSION.tar.gz >/dev/null 2>&1; then
  "$PY" -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==$VERSION" -d .
fi
if [ ! -d "llama_cpp_python-$VERSION/vendor/llama.cpp" ]; then
  tar xzf "llama_cpp_python-$VERSION.tar.gz"
fi
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
# shellcheck disable=SC2086
nice -n 10 cmake -S "$SRC" -B "$WORK/build" $FLAGS
nice -n 10 cmake --build "$WORK/build" --target llama-server -j"$JOBS"
mkdir -p "$DEST"
cp "$WORK/build/bin/llama-server" "$DEST/llama-server"
"$DEST/llama-server" --version
echo "Built $DEST/llama-server"
