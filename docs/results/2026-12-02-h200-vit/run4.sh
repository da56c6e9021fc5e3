#!/usr/bin/env bash
# Device call (H200): layer-norm parameter gradients summed by one block per column, channel
# sums (conv2d_backward_bias, reduce_sum_to) in the shared workspace; the miniature ViT block's
# plans seeded (--init kaiming). Kernel tests of the changed kernels, CPU/CUDA agreement of the
# miniature ViT block (fp32, fp16, bf16; both layouts), and ViT-B/16, ConvNeXt-T and
# EfficientNet-B0 (fp16, batch 128) beside PyTorch eager AMP.
set -u
r=/tmp/r; mkdir -p $r
source bench/gpu_env.sh
log=$r/tests.txt
for f in layer_norm reduce bias; do timeout 40 $bin/castor_cuda_kernel_tests $f 2>&1 | grep -E "^(PASS|FAIL)" >>$log; done
echo "kernel cases: $(grep -c ^PASS $log) pass, $(grep -c ^FAIL $log) fail" >>$log
timeout 100 $bin/castor_cuda_tests $carry/plans/tiny_transformer_fp32_adamw.plan \
  $carry/plans/tiny_transformer_fp16_adamw.plan $carry/plans/tiny_transformer_bf16_adamw.plan --steps 3 2>&1 \
  | grep -v "cuda tuning" | tail -20 >>$log
echo "transformer agreement exit ${PIPESTATUS[0]}" >>$log
tail -24 $log
for m in vit_b_16 convnext_tiny efficientnet_b0; do
  CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl CASTOR_LIMIT=60 TORCH_LIMIT=60 bench/torchvision_vs_torch.sh $m 128 $r/$m 2>&1 \
    | grep -v "^{" | grep -E "^\| fp16|kernel time"
  cat $r/$m/castor.jsonl $r/$m/torch.jsonl $r/$m/castor_stderr.txt >"$OUT/${m}_runs.jsonl" 2>/dev/null
done
cp $log "$OUT"/
