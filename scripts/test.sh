#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -LE gpu -j "$(nproc)"
