#!/usr/bin/env bash
# The main job: installs and builds, compiles the bundled ResNet-50 (weights from a seed) and
# runs its forward pass on the CPU reference backend at batch 1.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
mkdir -p out
build/bin/castor compile models/resnet50.onnx --init kaiming --seed 0 --batch 1 -o out/resnet50.plan
python3 -c "import numpy as np; np.save('out/image.npy', np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32))"
build/bin/castor-run infer out/resnet50.plan --init-seed 0 --input out/image.npy --output out/logits.npy
python3 -c "import numpy as np; y = np.load('out/logits.npy'); print('logits', y.shape, 'argmax', int(y.argmax()), 'finite', bool(np.isfinite(y).all()))"
