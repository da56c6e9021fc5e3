#!/usr/bin/env bash
# Configures and builds Castor in build/ (Ninja, Debian's LLVM/MLIR 19), reusing a build that is
# already there. With target names, builds only those (the main job needs castor and castor-run);
# without, everything (the tests).
#
#   scripts/build.sh [TARGET...]      # BUILD_DIR (default build), CMAKE_ARGS for a first configure
#
# CASTOR_CUDA=off builds without the CUDA backend (the main job on a machine without a GPU);
# CASTOR_CUDA=auto (or unset) with CMake's choice: on wherever a CUDA compiler and cuDNN are found.
# A build configured otherwise is reconfigured, reusing every object the change leaves alone.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cuda_arg=()
case "${CASTOR_CUDA:-auto}" in
  off) cuda_arg=(-DCASTOR_ENABLE_CUDA=OFF) ;;
  auto) cuda_arg=(-UCASTOR_ENABLE_CUDA) ;; # the option's default: CMake's detection
  *) echo "build.sh: CASTOR_CUDA is off or auto, not '$CASTOR_CUDA'" >&2; exit 2 ;;
esac
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086 # CMAKE_ARGS is a list of arguments
  cmake -G Ninja -S . -B "$BUILD_DIR" "${cuda_arg[@]}" \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DPython3_EXECUTABLE="$(command -v python3)" ${CMAKE_ARGS:-}
elif [ "${CASTOR_CUDA:-auto}" = auto ] && grep -q "^CASTOR_ENABLE_CUDA:BOOL=OFF" "$BUILD_DIR/CMakeCache.txt" \
  && grep -q "^CMAKE_CUDA_COMPILER:[A-Z]*=/" "$BUILD_DIR/CMakeCache.txt"; then
  cmake "$BUILD_DIR" "${cuda_arg[@]}" >/dev/null # the main job left the CUDA backend out; the tests build it
fi # (a build with the CUDA backend serves CASTOR_CUDA=off as it is)
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" "${targets[@]}"
