#!/usr/bin/env bash
# ResNet-50 fp16/bf16 b256 with the stem's input channels 3 (as torchvision), 4 and 8 (models/resnet.py
# --in-channels): what the 7x7 stem costs at each width, and every kernel's time of the step.
set -uo pipefail
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for p in r50_fp16 r50c4_fp16 r50c8_fp16 r50_bf16 r50c4_bf16 r50c8_bf16; do
  CASTOR_PROFILE_KERNELS=1 "$bin/castor-run" bench "$carry/plans/${p}_b256.plan" --steps 30 --warmup 5 --json >"$OUT/$p.txt" 2>&1
  echo "== $p: $(grep -o '"img_per_s": [0-9.]*' "$OUT/$p.txt") $(grep -o '"peak_gib": [0-9.]*' "$OUT/$p.txt")"
  grep -E "kernel [0-9]+ .*(/conv1/Conv |/maxpool/|images)" "$OUT/$p.txt" | sed 's/castor-run: //' | cut -c1-150
done
