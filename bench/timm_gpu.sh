#!/usr/bin/env bash
# timm models on the GPU machine (issue "Model coverage beyond torchvision"), from the plans of
# bench/compile_timm_plans.sh in gpu-carry/plans. Run from the repository root:
#
#   bench/timm_gpu.sh models    # the depthwise kernels' tests and bandwidth, then every
#                               # timm-*_fp16_bBATCH plan beside PyTorch eager AMP (device_call.sh)
#   bench/timm_gpu.sh compare   # the 40-step fp16 loss comparison against PyTorch AMP of every
#                               # timm-*_cmp plan (test/torch_reference/run_amp_comparison.sh)
#
# Environment: BATCH (default 128), STEPS (castor-run bench steps, default 20), CMP_STEPS (40),
# FLOOR=1 to run PyTorch's own variants beside the comparison (NCHW, one ulp, fp32).
# $OUT gets what device_call.sh writes, depthwise_tests.txt, dwconv_f16.jsonl and amp/.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
export carry
: "${OUT:?set OUT}"
mkdir -p "$OUT"
case ${1:?usage: timm_gpu.sh models|compare} in
  models)
    if [ -x "$bin/castor_depthwise_conv_tests" ]; then
      timeout 120 "$bin/castor_depthwise_conv_tests" >"$OUT/depthwise_tests.txt" 2>&1
      echo "castor_depthwise_conv_tests: exit $?, $(grep -c FAIL "$OUT/depthwise_tests.txt") FAIL lines"
      tail -3 "$OUT/depthwise_tests.txt"
      timeout 90 "$bin/castor-dwconv-bench" --batch 128 --dtype f16 >"$OUT/dwconv_f16.jsonl" 2>&1
      echo "castor-dwconv-bench: exit $?, $(wc -l <"$OUT/dwconv_f16.jsonl") lines"
    fi
    plans=$(cd "$carry/plans" && ls timm-*_fp16_b"${BATCH:-128}".plan | sed 's/\.plan$//' | tr '\n' ' ')
    BENCH_LIMIT=${BENCH_LIMIT:-90} TORCH_LIMIT=${TORCH_LIMIT:-70} \
      bash "$(dirname "$0")/device_call.sh" --plans "$plans" --steps "${STEPS:-20}" --peers amp-fp16-cl
    ;;
  compare)
    for plan in "$carry"/plans/timm-*_cmp.plan; do
      m=$(basename "$plan" | sed -E 's/_fp16_b[0-9]+_cmp\.plan$//')
      PLAN=$plan MODEL=$m WORK=/tmp/amp-$m EXTRA="--steps ${CMP_STEPS:-40}$([ "${FLOOR:-0}" = 1 ] || echo " --no-floor")" \
        timeout 240 test/torch_reference/run_amp_comparison.sh "$carry" "$OUT/amp" >"$OUT/amp-$m.out" 2>&1
      echo "$m: exit $? $(grep -E '^(mean of|first )' "$OUT/amp-$m.out" | tr '\n' ' ')"
    done
    ;;
  *) echo "timm_gpu.sh: models or compare" >&2; exit 2 ;;
esac
