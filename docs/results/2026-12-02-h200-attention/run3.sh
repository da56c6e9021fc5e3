#!/usr/bin/env bash
# Device call (H200): the CNNs and Swin-T on the runtime with views and the storage-order rule in
# plan/: ResNet-50 fp16 (batch 256), ConvNeXt-T, EfficientNet-B0 and Swin-T fp16 (batch 128),
# each beside PyTorch eager AMP (channels-last) in the same call; ConvNeXt's depthwise layers now
# also take cuDNN heuristics mode B's engines.
set -u
r=/tmp/r; mkdir -p $r
source bench/gpu_env.sh
CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl bench/resnet50_vs_torch.sh $carry $r/r50 2>&1 | grep -E "^\||kernel time"
for m in convnext_tiny efficientnet_b0 swin_t; do
  CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl CASTOR_LIMIT=80 TORCH_LIMIT=90 bench/torchvision_vs_torch.sh $m 128 $r/$m 2>&1 \
    | grep -v "^{" | grep -E "^\| fp16|kernel time"
  tail -3 $r/$m/castor_stderr.txt | cut -c1-300
done
for m in r50 convnext_tiny efficientnet_b0 swin_t; do
  cat $r/$m/castor.jsonl $r/$m/torch.jsonl >"$OUT/${m}_runs.jsonl" 2>/dev/null
done
# A data-parallel plan (castor compile --data-parallel) run by one replica on the GPU: its
# all_reduce kernels change nothing, the loss follows the plan compiled without them.
for p in tiny_fp16_adamw_dp tiny_fp16_adamw; do
  timeout 60 $bin/castor-run train $carry/plans/$p.plan --device cuda --steps 5 --seed 3 2>&1 | tail -1
done
