#!/usr/bin/env bash
# The GPU tests of the runtime of b6dbc14 as every call runs them: the kernel tests, then the
# tiny plans' CPU/CUDA agreement (all 8 plans, both layouts, 3 steps) on the tuning cache they
# leave; the 100-step fp16 ResNet-50 loss comparison against PyTorch AMP (batch 64, fusion on);
# the fused tiny ResNet (fp16) against the CPU reference over 50 steps (which CI shows bit for bit
# equal to the unfused plan's).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 100 "$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "^FAIL" "$OUT/kernel_tests.txt" | head
timeout 200 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 >"$OUT/agreement.txt" 2>&1
echo "agreement: rc $? $(tail -1 "$OUT/agreement.txt")"
grep FAIL "$OUT/agreement.txt" | cut -c1-200 | head -4
cp /tmp/castor-tuning/*.txt "$OUT/tuning_cache.txt"
timeout 200 test/torch_reference/run_amp_comparison.sh "$carry" "$OUT/amp" >/tmp/amp.out 2>&1
echo "amp comparison: rc $?"; tail -4 /tmp/amp.out
timeout 170 "$bin/castor_cuda_tests" "$carry/plans/tiny_fp16_adamw.plan" --steps 50 >"$OUT/agreement_50.txt" 2>&1
echo "agreement 50 steps: rc $? $(tail -1 "$OUT/agreement_50.txt")"
grep -E "step 50|FAIL" "$OUT/agreement_50.txt" | cut -c1-220
