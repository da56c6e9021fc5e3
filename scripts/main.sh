#!/usr/bin/env bash
# The main job: installs and builds; compiles the bundled ResNet-50 into a mixed-precision
# training step; then, on a machine with an NVIDIA GPU (and a build with the CUDA backend),
# trains ResNet-50 with it on synthetic data and times it (castor-run bench); without one, trains
# a small ResNet on Fashion-MNIST on the CPU reference backend and evaluates it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# What the job runs; scripts/test.sh builds the rest. Without a GPU the job trains on the CPU
# backend, so a first build leaves the CUDA backend (a third of the build) to scripts/test.sh.
if ! nvidia-smi -L >/dev/null 2>&1; then export CASTOR_CUDA=${CASTOR_CUDA:-off}; fi
./scripts/build.sh castor castor-run
mkdir -p out
STEPS=${STEPS:-600}

echo "== ResNet-50: the training step, fp16 with dynamic loss scaling, batch 256"
build/bin/castor compile models/resnet50.onnx --init kaiming --batch 256 --train --optimizer adamw --lr 1e-3 \
  --weight-decay 0.05 --no-decay-bn-bias --precision fp16 -o out/resnet50_train.plan

if nvidia-smi -L >/dev/null 2>&1 && grep -q "^CASTOR_ENABLE_CUDA:BOOL=ON" build/CMakeCache.txt \
  && [ "${CASTOR_MAIN_DEVICE:-cuda}" = cuda ]; then
  echo "== ResNet-50 on the GPU: 100 training steps on synthetic data, then the benchmark"
  build/bin/castor-run train out/resnet50_train.plan --device cuda --steps "${GPU_STEPS:-100}" --data synthetic \
    --log-json out/resnet50_log.jsonl
  build/bin/castor-run bench out/resnet50_train.plan --device cuda --steps 30
  exit 0
fi

echo "== A small ResNet on Fashion-MNIST, CPU reference backend, ${STEPS} steps of 64"
python3 models/resnet.py --arch tiny --weights none -o out/small_resnet.onnx > /dev/null
build/bin/castor compile out/small_resnet.onnx --init kaiming --seed 0 --batch 64 --train --optimizer sgd \
  --lr 0.1 --momentum 0.9 --weight-decay 5e-4 --no-decay-bn-bias --schedule cosine --total-steps "$STEPS" \
  -o out/small_resnet_train.plan 2> /dev/null
build/bin/castor-run train out/small_resnet_train.plan --steps "$STEPS" --seed 0 \
  --data idx:/usr/share/datasets/fashion-mnist --log-json out/train_log.jsonl --save out/small_resnet_state.safetensors
build/bin/castor compile out/small_resnet.onnx --init kaiming --batch 500 --eval -o out/small_resnet_eval.plan 2> /dev/null
build/bin/castor-run eval out/small_resnet_eval.plan --weights out/small_resnet_state.safetensors \
  --data idx:/usr/share/datasets/fashion-mnist
