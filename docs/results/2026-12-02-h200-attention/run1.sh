#!/usr/bin/env bash
# Device call (H200): reshapes as views (castor-plan-views), fused attention (castor-fuse-attention,
# cuDNN's SDPA forward and backward). The whole CUDA kernel suite (attention cases included), the
# CPU/CUDA agreement of every tiny*.plan (tiny_attention_{fp16,bf16}: fused attention), then
# ViT-B/16 fp16 and bf16 at batch 128 beside PyTorch eager AMP in the same call.
set -u
r=/tmp/r; mkdir -p $r
source bench/gpu_env.sh
log=$r/tests.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>$log
timeout 120 $bin/castor_cuda_kernel_tests >$r/kernels.txt 2>&1; echo "kernel tests exit $?" >>$log
echo "kernel cases: $(grep -c ^PASS $r/kernels.txt) pass, $(grep -c ^FAIL $r/kernels.txt) fail" >>$log
grep -E "^FAIL" $r/kernels.txt | head -20 >>$log
grep -iE "attention" $r/kernels.txt | head -12 >>$log
timeout 120 $bin/castor_cuda_tests $carry/plans --steps 3 2>&1 | grep -v "cuda tuning" | tail -40 >>$log
echo "agreement exit ${PIPESTATUS[0]}" >>$log
cat $log
CASTOR_LIMIT=100 TORCH_MODES=amp-fp16-cl,amp-bf16-cl TORCH_LIMIT=150 bench/torchvision_vs_torch.sh vit_b_16 128 $r/vit 2>&1 \
  | grep -v "^{" | grep -E "^\||kernel time"
cat $r/vit/castor.jsonl $r/vit/torch.jsonl $r/vit/castor_stderr.txt >"$OUT/vit_runs.jsonl" 2>/dev/null
cp $log $r/kernels.txt $r/vit/summary.md "$OUT"/ 2>/dev/null
