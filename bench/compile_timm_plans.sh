#!/usr/bin/env bash
# Plans of timm models for the GPU comparison beside PyTorch (bench/device_call.sh --peers, whose
# bench/torch_torchvision.py builds timm's model for a name timm-NAME), compiled here from the
# graph-only exports of scripts/export_model_zoo.py into gpu-carry/plans:
#   timm-NAME_fp16_bBATCH.plan      AdamW lr 1e-3, weight decay 0.01, as torch_torchvision.py trains
#   timm-NAME_fp16_b64_cmp.plan     (CMP models) for test/torch_reference/compare_amp.py: AdamW
#                                   lr 1e-4, loss scale from 8192 (no step skipped on either side)
#
#   bench/compile_timm_plans.sh EXPORTS_DIR [BATCH]     # CASTOR: the compiler (default build/bin/castor)
#
# MODELS and CMP (space-separated timm names) override the defaults: ten families, and a
# transformer, an SE network, a model with Split and ConvNeXt (depthwise convolutions, transposed
# views) for the training comparison.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exports=${1:?usage: compile_timm_plans.sh EXPORTS_DIR [BATCH]}
batch=${2:-128}
castor="${CASTOR:-$root/build/bin/castor}"
out="$root/gpu-carry/plans"
mkdir -p "$out"
models=${MODELS:-"resnet50d seresnext26d_32x4d ecaresnet50t res2net50_26w_4s efficientnet_b0 mobilenetv3_large_100
  regnety_016 convnext_tiny cspresnet50 vit_small_patch16_224"}
cmp=${CMP:-"vit_small_patch16_224 seresnext26d_32x4d res2net50_26w_4s convnext_tiny"}
common=(--init kaiming --train --precision fp16 --optimizer adamw --weight-decay 0.01)

for m in $models; do
  "$castor" compile "$exports/$m.onnx" "${common[@]}" --lr 1e-3 --batch "$batch" \
    -o "$out/timm-${m}_fp16_b${batch}.plan" >/dev/null 2>&1 || echo "compile_timm_plans.sh: $m failed" >&2
done
for m in $cmp; do
  "$castor" compile "$exports/$m.onnx" "${common[@]}" --lr 1e-4 --beta1 0.9 --beta2 0.999 --eps 1e-8 \
    --loss-scale dynamic --loss-scale-init 8192 --batch 64 -o "$out/timm-${m}_fp16_b64_cmp.plan" >/dev/null 2>&1 ||
    echo "compile_timm_plans.sh: $m (comparison plan) failed" >&2
done
ls -la "$out" | grep timm-
