#!/usr/bin/env bash
# Configures and builds Castor in build/ (Ninja, Debian's LLVM/MLIR 19), reusing a build that is
# already there. With target names, builds only those (the main job needs castor and castor-run);
# without, everything (the tests).
#
#   scripts/build.sh [TARGET...]      # BUILD_DIR (default build), CMAKE_ARGS for a first configure
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086 # CMAKE_ARGS is a list of arguments
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DPython3_EXECUTABLE="$(command -v python3)" ${CMAKE_ARGS:-}
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" "${targets[@]}"
