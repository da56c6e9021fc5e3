#!/usr/bin/env bash
# The depthwise kernels on the GPU machine, from the repository root, with what
# scripts/build_gpu.sh put in gpu-carry/: their tests, their bandwidth per layer beside cuDNN's and
# a copy of the same bytes, optionally their hardware counters, then training steps of each plan
# with every own kernel racing (CASTOR_CONV_DEPTHWISE unset), the tiles alone (`tiles`) and cuDNN
# alone (`0`), each on a tuning cache of its own, and PyTorch eager AMP of the same models.
#
#   bench/depthwise_gpu.sh [OUT_DIR]      # default $OUT
#
# Environment: TESTS=0 skips castor_depthwise_conv_tests; DTYPE (f16) for castor-dwconv-bench;
# NCU="regex" profiles the kernels whose names match (ncu, clocks left alone); PLANS (plans of
# gpu-carry/plans without .plan) and TORCH_MODELS (bench/torch_torchvision.py names) for the steps;
# MODES (amp-fp16-cl) for PyTorch.
# Results in OUT_DIR: tests.txt, dwconv.jsonl (one line a layer, pass and implementation),
# ncu.csv, bench_PLAN_VARIANT.json (castor-run bench --json) with its stderr, torch_MODEL.jsonl.
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader >"$out/gpu.txt"
if [ "${TESTS:-1}" = 1 ]; then
  timeout 300 "$bin/castor_depthwise_conv_tests" >"$out/tests.txt" 2>&1
  echo "castor_depthwise_conv_tests rc=$? $(grep -c '^ok' "$out/tests.txt") ok $(grep -c '^FAIL' "$out/tests.txt") failed"
fi
timeout 300 "$bin/castor-dwconv-bench" --dtype "${DTYPE:-f16}" >"$out/dwconv.jsonl" 2>"$out/dwconv.err"
echo "castor-dwconv-bench rc=$?"
if [ -n "${NCU:-}" ]; then
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
  metrics=$metrics,launch__registers_per_thread,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
  metrics=$metrics,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
  for stall in long_scoreboard barrier short_scoreboard mio_throttle lg_throttle math_pipe_throttle wait not_selected; do
    metrics=$metrics,smsp__average_warps_issue_stalled_${stall}_per_issue_active.ratio
  done
  timeout 300 ncu --clock-control none --csv --page raw --metrics "$metrics,launch__grid_size,launch__block_size" \
    -k "regex:$NCU" "$bin/castor-dwconv-bench" --dtype "${DTYPE:-f16}" --iters 1 --no-cudnn >"$out/ncu.csv" 2>"$out/ncu.err"
  echo "ncu rc=$?"
fi
for plan in ${PLANS:-}; do
  for variant in default tiles 0; do
    mkdir -p "/tmp/depthwise-tuning/$plan-$variant"
    env $([ "$variant" != default ] && echo "CASTOR_CONV_DEPTHWISE=$variant") \
      CASTOR_TUNING_CACHE="/tmp/depthwise-tuning/$plan-$variant" timeout 200 "$bin/castor-run" bench \
      "$carry/plans/$plan.plan" --device cuda --steps 30 --json >"$out/bench_${plan}_$variant.json" \
      2>"$out/bench_${plan}_$variant.log"
    echo "$plan $variant rc=$? $(tail -1 "$out/bench_${plan}_$variant.json")" | cut -c1-200
  done
done
for model in ${TORCH_MODELS:-}; do
  timeout "${TORCH_LIMIT:-300}" python3 bench/torch_torchvision.py --model "$model" --modes "${MODES:-amp-fp16-cl}" \
    --batch 128 >"$out/torch_$model.jsonl" 2>"$out/torch_$model.err"
  echo "torch $model rc=$?"
done
