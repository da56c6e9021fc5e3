#!/usr/bin/env bash
# Device call (H200): a data-parallel plan (castor compile --data-parallel) run by one replica on
# the GPU, beside the same plan without it; then the runtime with views, the storage-order rule in
# plan/ and cuDNN heuristics mode B for grouped convolutions on CNNs and Swin-T: ResNet-50 fp16
# (batch 256), ConvNeXt-T and Swin-T fp16 (batch 128), each beside PyTorch eager AMP
# (channels-last) in the same call.
set -u
r=/tmp/r; mkdir -p $r
source bench/gpu_env.sh
for p in tiny_fp16_adamw_dp tiny_fp16_adamw; do
  timeout 60 $bin/castor-run train $carry/plans/$p.plan --device cuda --steps 5 --seed 3 2>&1 | tail -1
done
CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl bench/resnet50_vs_torch.sh $carry $r/r50 2>&1 | grep -E "^\| fp16"
for m in convnext_tiny swin_t; do
  CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl CASTOR_LIMIT=80 TORCH_LIMIT=90 bench/torchvision_vs_torch.sh $m 128 $r/$m 2>&1 \
    | grep -v "^{" | grep -E "^\| fp16|kernel time"
  tail -2 $r/$m/castor_stderr.txt | cut -c1-300
done
for m in r50 convnext_tiny swin_t; do
  cat $r/$m/castor.jsonl $r/$m/torch.jsonl >"$OUT/${m}_runs.jsonl" 2>/dev/null
done
