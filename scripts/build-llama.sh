#!/usr/bin/env bash
# Builds llama-cpp-python once per machine as a portable wheel and installs it.
#
# Why not `pip install llama-cpp-python`: PyPI ships only the source, and its
# default build compiles with GGML_NATIVE=ON, picking every instruction the
# building CPU reports. On a Xeon that reports AMX inside a sandbox that does
# not grant AMX tile state, that build dies with a general-protection fault at
# its first generation (issue 13). This build targets any x86-64 with AVX2
# (Haswell, 2013, and later; every AMD Zen): no AVX-512, no AMX, nothing picked
# at compile time from the building machine. pip's wheel cache is keyed by the
# source file alone, not by CMAKE_ARGS, so the wheel is kept in a folder of our
# own named for the version and the flags.
set -euo pipefail
PY=${1:?usage: build-llama.sh PYTHON}
source "$(dirname "$0")/llama-flags.sh"
VERSION=$LLAMA_VERSION
FLAGS=$LLAMA_FLAGS
KEY=$(printf '%s %s' "$VERSION" "$FLAGS" | sha256sum | cut -c1-12)
HOUSE=${STORY_WORKBENCH_WHEELS:-$HOME/.cache/story-workbench/wheels}/llama-cpp-python-$VERSION-portable-$KEY

if "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama-cpp-python') != '$VERSION')" 2>/dev/null \
   && [ -f "$($PY -c 'import sys; print(sys.prefix)')/.llama-portable-$KEY" ]; then
  exit 0
fi
if ! ls "$HOUSE"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "Compiling llama-cpp-python $VERSION for any x86-64 with AVX2 (about 8-11 minutes on 2 cores, once per machine)..."
  mkdir -p "$HOUSE.tmp"
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$PY" -m pip wheel --quiet --no-deps --no-cache-dir \
    --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -w "$HOUSE.tmp"
  rm -rf "$HOUSE" && mv "$HOUSE.tmp" "$HOUSE"
fi
# --force-reinstall replaces a natively built copy pip may have put there;
# the second call brings its pure-Python dependencies from the index.
"$PY" -m pip install --quiet --force-reinstall --no-deps "$HOUSE"/llama_cpp_python-*.whl
"$PY" -m pip install --quiet "$HOUSE"/llama_cpp_python-*.whl
touch "$($PY -c 'import sys; print(sys.prefix)')/.llama-portable-$KEY"
