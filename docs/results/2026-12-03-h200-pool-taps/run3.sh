#!/usr/bin/env bash
# After the review's mends (the casts' one conversion shared by both cast kernels, the test's
# batch-norm pair in one helper): the GPU kernel tests, the tiny plans' CPU/CUDA agreement, and
# ResNet-50 fp16 b256 once, with each kernel's time.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 "$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "^FAIL" "$OUT/kernel_tests.txt" | head
timeout 200 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 >"$OUT/agreement.txt" 2>&1
echo "agreement: rc $? $(tail -1 "$OUT/agreement.txt")"
CASTOR_PROFILE_KERNELS=1 timeout 120 "$bin/castor-run" bench "$carry/plans/r50_fp16_b256.plan" --steps 50 --warmup 5 --json >"$OUT/r50.txt" 2>&1
echo "r50: rc $? $(grep -o '"img_per_s": [0-9.]*' "$OUT/r50.txt") $(grep -o '"peak_gib": [0-9.]*' "$OUT/r50.txt")"
grep -E "\(cast( |\))" "$OUT/r50.txt" | awk '$4 > 0.01' | sed 's/castor-run: //'
