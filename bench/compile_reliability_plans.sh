#!/usr/bin/env bash
# Plans for the reliability runs on the GPU machine (bench/reliability_gpu.sh, bench/soak_gpu.sh),
# compiled here into gpu-carry/plans beside those of scripts/build_gpu.sh: the tiny ResNet in fp32
# without the non-finite guard, the MLP with a 38 MB state for kill -9 during saves, and the soak's
# ResNet-18 (fp16, batch 256, 112x112, AdamW, dynamic loss scaling).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
castor="$root/build/bin/castor"
out="$root/gpu-carry/plans"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
python3 "$root/models/resnet.py" --arch tiny --weights none --image-size 32 --num-classes 10 -o "$work/tiny.onnx" >/dev/null
"$castor" compile "$work/tiny.onnx" --init kaiming --batch 16 --train --optimizer adamw --lr 1e-4 --loss-scale none \
  -o "$out/tiny_fp32_unguarded.plan" >/dev/null 2>&1
python3 "$root/models/mlp.py" --hidden 4096 --weights none -o "$work/mlp4096.onnx" >/dev/null
"$castor" compile "$work/mlp4096.onnx" --init kaiming --batch 8 --train --optimizer adamw -o "$out/mlp4096.plan" \
  >/dev/null 2>&1
python3 "$root/models/resnet.py" --arch resnet18 --weights none --image-size 112 --num-classes 1000 \
  -o "$work/resnet18.onnx" >/dev/null
"$castor" compile "$work/resnet18.onnx" --init kaiming --batch 256 --train --precision fp16 --optimizer adamw \
  --lr 1e-3 --weight-decay 0.01 -o "$out/r18_soak.plan" >/dev/null 2>&1
ls -la "$out"/tiny_fp32_unguarded.plan "$out"/mlp4096.plan "$out"/r18_soak.plan
# Castor -> torchvision (bench/torchvision_roundtrip.py): ResNet-18 with torchvision's names,
# its graph, a training plan and Castor's eval plan.
python3 "$root/models/resnet.py" --arch resnet18 --weights none --num-classes 1000 -o "$out/resnet18.onnx" >/dev/null
"$castor" compile "$out/resnet18.onnx" --init kaiming --batch 32 --train --precision fp16 --optimizer adamw \
  --lr 1e-3 -o "$out/r18_rt_train.plan" >/dev/null 2>&1
"$castor" compile "$out/resnet18.onnx" --init kaiming --batch 32 --eval -o "$out/r18_rt_eval.plan" >/dev/null 2>&1
# The state check's cases (test/training/state_check.py --plans): the tiny ResNet's state_*.plan.
python3 "$root/test/training/state_check.py" --compile-only --castor "$castor" --models "$root/models" \
  --plans "$out" --castor-run "$root/build/bin/castor-run" --work "$work"
