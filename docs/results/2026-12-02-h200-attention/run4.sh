#!/usr/bin/env bash
# Device call (H200): ResNet-50 fp16 (batch 256) beside PyTorch eager AMP and torch.compile in
# the same call (the binaries of run3.sh).
set -u
r=/tmp/r; mkdir -p $r
source bench/gpu_env.sh
CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl,compile-fp16-cl timeout 290 bench/resnet50_vs_torch.sh $carry $r/r50 2>&1 \
  | grep -E "^\||kernel time"
cat $r/r50/castor.jsonl $r/r50/torch.jsonl >"$OUT/r50_compile_runs.jsonl" 2>/dev/null
