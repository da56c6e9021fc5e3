#!/usr/bin/env bash
# Device call (H200): the strided-move and broadcast kernels with 32-bit indexing, merged
# dimensions and 16-byte units, and rank-4 tensors row-major unless a convolution, batch norm or
# pooling kernel touches them: the kernel suite, CPU/CUDA agreement of the small plans (both
# layouts), ViT-B/16 again, the bf16 loss comparison, ConvNeXt-T and EfficientNet-B0 beside
# PyTorch eager AMP.
set -u
out="$OUT"
source bench/gpu_env.sh
log="$out/tests.txt"
timeout 150 $bin/castor_cuda_kernel_tests >/tmp/kernels.txt 2>&1; echo "kernel tests exit $?" >>"$log"
grep -E "^FAIL" /tmp/kernels.txt | head -20 >>"$log"; grep -c "^PASS" /tmp/kernels.txt >>"$log"
timeout 150 $bin/castor_cuda_tests $carry/plans --steps 3 2>&1 | tail -30 >>"$log"; echo "agreement exit ${PIPESTATUS[0]}" >>"$log"
cat "$log"
CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl bench/torchvision_vs_torch.sh vit_b_16 128 "$out/vit" 2>&1 | grep -v "^{" | tail -12
PLAN=$carry/plans/vit_b_16_bf16_b128_cmp.plan MODEL=vit_b_16 NAME=amp_vit_b_16_bf16 EXTRA="--steps 50" \
  timeout 200 test/torch_reference/run_amp_comparison.sh $carry "$out" >"$out/cmp_bf16.txt" 2>&1
echo "comparison bf16 exit $?"; tail -9 "$out/cmp_bf16.txt"
for m in convnext_tiny efficientnet_b0; do
  CASTOR_PRECISIONS=fp16 TORCH_MODES=amp-fp16-cl bench/torchvision_vs_torch.sh $m 128 "$out/$m" 2>&1 | grep -v "^{" | tail -8
done
