#!/usr/bin/env bash
# The commands of every CTest test labelled "gpu" (test/cuda/CMakeLists.txt), run on the GPU
# machine from the repository root with gpu-carry/ (scripts/build_gpu.sh), each as CTest runs it:
# the tuning-cache check on a tuning cache of its own (CTest leaves CASTOR_TUNING_CACHE unset;
# gpu_env.sh sets one for the whole call), the agreement over every tiny*.plan of the carry (about
# 4 s of kernel compilation each). About 5 minutes on an H100.
#
#   bench/gpu_tests.sh [OUT_DIR]   # default $OUT; OUT_DIR/gpu_tests.txt: one line a test, then each one's output
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
summary="$out/gpu_tests.txt" work=/tmp/castor-gpu-tests
rm -rf "$work" && mkdir -p "$work"
failed=0
# gpu_test NAME LIMIT COMMAND...: one line "NAME exit N, S s: <its last line>".
gpu_test() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$work/$name.txt" 2>&1
  local rc=$?
  [ $rc = 0 ] || failed=$((failed + 1))
  echo "$name exit $rc, $((SECONDS - start)) s: $(grep -v '^castor-run: cuda load' "$work/$name.txt" | tail -1 | cut -c1-200)" |
    tee -a "$summary"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$summary"
gpu_test cuda.agreement 600 "$bin/castor_cuda_tests" "$carry/plans" --steps 3
gpu_test cuda.kernels 600 "$bin/castor_cuda_kernel_tests"
gpu_test cuda.conv 600 "$bin/castor_conv_tests"
gpu_test cuda.deterministic 600 bash test/cuda/check_deterministic.sh "$bin/castor-run" "$carry/plans/tiny_fp16_adamw.plan" 20 "$work/deterministic"
gpu_test cuda.tuning-cache 600 env -u CASTOR_TUNING_CACHE bash test/cuda/check_tuning_cache.sh "$bin/castor-run" \
  "$carry/plans/tiny_fp16_adamw.plan" "$carry/plans/tiny_bf16_adamw.plan" "$work/tuning-cache"
gpu_test cuda.depthwise-conv 600 "$bin/castor_depthwise_conv_tests"
gpu_test cuda.grouped-conv 600 "$bin/castor_grouped_conv_tests"
echo "$failed of 7 failing" | tee -a "$summary"
for f in "$work"/*.txt; do echo "== $(basename "$f" .txt)"; tail -40 "$f"; done >>"$summary"
exit $((failed > 0))
