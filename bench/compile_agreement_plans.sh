#!/usr/bin/env bash
# Small training plans for castor_cuda_tests (the CUDA backend against the CPU reference, plan by
# plan, a few steps), compiled here into gpu-carry/agree: the tiny CNN and ViT block of
# scripts/build_gpu.sh, and at batch 2 the models whose kernels are newest: EfficientNet-B0
# (generated groups with reduction outputs, depthwise convolutions), ConvNeXt (transposed views,
# 7x7 depthwise, layer norm over channels, layer scale), RegNetY (grouped convolutions) and
# Res2Net (split, slices, concat), from graph-only timm exports (scripts/export_model_zoo.py).
#
#   bench/compile_agreement_plans.sh EXPORTS_DIR     # CASTOR: the compiler (default build/bin/castor)
#
# On the GPU machine: gpu-carry/bin/castor_cuda_tests gpu-carry/agree --steps 3
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exports=${1:?usage: compile_agreement_plans.sh EXPORTS_DIR}
castor="${CASTOR:-$root/build/bin/castor}"
out="$root/gpu-carry/agree"
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train=(--init kaiming --train --optimizer adamw --lr 1e-4 --emit-gradients)

python3 "$root/models/resnet.py" --arch tiny --weights none --image-size 32 --num-classes 10 -o "$work/tiny.onnx" >/dev/null
python3 "$root/test/cuda/make_tiny_transformer.py" "$work/tiny_transformer.onnx"
for p in fp32 fp16 bf16; do
  "$castor" compile "$work/tiny.onnx" "${train[@]}" --batch 16 --precision "$p" -o "$out/tiny_${p}.plan" >/dev/null 2>&1
  "$castor" compile "$work/tiny_transformer.onnx" "${train[@]}" --precision "$p" -o "$out/tiny_transformer_${p}.plan" \
    >/dev/null 2>&1
done
for m in efficientnet_b0 convnext_nano regnety_016 res2net50_26w_4s; do
  "$castor" compile "$exports/$m.onnx" "${train[@]}" --batch 2 --precision fp16 -o "$out/timm-${m}_fp16_b2.plan" \
    >/dev/null 2>&1 || echo "compile_agreement_plans.sh: $m failed" >&2
done
ls "$out"
