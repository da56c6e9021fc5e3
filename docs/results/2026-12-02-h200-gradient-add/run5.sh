#!/usr/bin/env bash
# Device call (H200): the 100-step ResNet-50 fp16 loss comparison against PyTorch AMP on the
# plan compiled with every fusion on (batch-norm-ReLU, the gradient add in the data gradient),
# r50_fp16_b64_cmp.plan as test/torch_reference/run_amp_comparison.sh describes.
set -u
source bench/gpu_env.sh
WORK=/tmp/amp timeout 200 test/torch_reference/run_amp_comparison.sh gpu-carry $OUT/amp 2>&1 | tail -8
