#!/usr/bin/env bash
# Configures and builds Castor in build/ (Ninja, Debian's LLVM/MLIR 19).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DPython3_EXECUTABLE="$(command -v python3)" "$@"
fi
cmake --build "$BUILD_DIR"
