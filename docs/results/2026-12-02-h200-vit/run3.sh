#!/usr/bin/env bash
# Device call (H200): GELU as one op (castor-fuse-gelu), softmax in its input's precision,
# layer-norm backward in more chunks; the kernel suite, CPU/CUDA agreement of the miniature ViT
# block's training steps (fp32, fp16, bf16; both layouts), the ViT-B/16 fp16 50-step loss
# comparison, and ViT-B/16 (fp16, bf16) and ConvNeXt-T (fp16) beside PyTorch eager AMP and
# torch.compile in the same call. Everything goes to /tmp/r; the files kept are copied to $OUT.
set -u
r=/tmp/r; mkdir -p $r
source bench/gpu_env.sh
log=$r/tests.txt
timeout 120 $bin/castor_cuda_kernel_tests >$r/kernels.txt 2>&1; echo "kernel tests exit $?" >>$log
grep -E "^FAIL" $r/kernels.txt | head -20 >>$log; grep -c "^PASS" $r/kernels.txt >>$log
grep -E "gelu|transpose \[5,3|slice \[3,7" $r/kernels.txt >>$log
timeout 150 $bin/castor_cuda_tests $carry/plans/tiny_transformer_fp32_adamw.plan \
  $carry/plans/tiny_transformer_fp16_adamw.plan $carry/plans/tiny_transformer_bf16_adamw.plan --steps 3 2>&1 \
  | grep -v "cuda tuning" | tail -24 >>$log
echo "transformer agreement exit ${PIPESTATUS[0]}" >>$log
cat $log
PLAN=$carry/plans/vit_b_16_fp16_b128_cmp.plan MODEL=vit_b_16 NAME=amp_vit_b_16_fp16 EXTRA="--steps 50 --no-floor" \
  timeout 170 test/torch_reference/run_amp_comparison.sh $carry $r >$r/cmp_fp16.txt 2>&1
echo "comparison fp16 exit $?"; tail -5 $r/cmp_fp16.txt
TORCH_MODES=amp-fp16-cl,compile-fp16-cl,amp-bf16-cl,compile-bf16-cl bench/torchvision_vs_torch.sh vit_b_16 128 $r/vit 2>&1 \
  | grep -v "^{" | tail -16
CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl,compile-fp16-cl bench/torchvision_vs_torch.sh convnext_tiny 128 $r/convnext 2>&1 \
  | grep -v "^{" | tail -8
cp $log $r/amp_vit_b_16_fp16.json $r/amp_vit_b_16_fp16.txt "$OUT"/ 2>/dev/null
for m in vit convnext; do
  cat $r/$m/castor.jsonl $r/$m/torch.jsonl >"$OUT/${m}_runs.jsonl" 2>/dev/null
  cat $r/$m/summary.md $r/$m/castor_stderr.txt >"$OUT/${m}_summary.md" 2>/dev/null
done
