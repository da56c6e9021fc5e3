#!/usr/bin/env bash
# The main job: installs, builds, then imports the bundled ResNet-50 (weights seeded) and
# prints what it holds.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
mkdir -p out
build/bin/castor import models/resnet50.onnx --init kaiming --seed 0 --batch 32 -o out/resnet50.mlir
echo "castor dialect of the bundled ResNet-50 (batch 32): out/resnet50.mlir"
for op in conv2d batch_norm_training relu max_pool2d add global_avg_pool flatten gemm parameter; do
  printf '  %-22s %s\n' "castor.$op" "$(grep -c "castor.$op " out/resnet50.mlir || true)"
done
