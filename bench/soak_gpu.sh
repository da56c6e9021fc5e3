#!/usr/bin/env bash
# Soak on the GPU machine, from the repository root: ResNet-18 (gpu-carry/plans/r18_soak.plan,
# bench/compile_reliability_plans.sh) trained SOAK_STEPS steps (default 20000) by castor-run train
# on synthetic data, with the device memory (nvidia-smi) and castor-run's resident host memory
# sampled every 2 s; bench/soak_summary.py then reports their drift, the step time's drift and
# every skipped step.
#
#   bench/soak_gpu.sh [OUT_DIR]      # default $OUT; writes soak.jsonl, samples.csv, summary.json
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
steps="${SOAK_STEPS:-20000}"
plan="${SOAK_PLAN:-$carry/plans/r18_soak.plan}"
"${CASTOR_RUN:-$bin/castor-run}" train "$plan" --steps "$steps" --device "${SOAK_DEVICE:-cuda}" --seed 1 \
  --log-json "$out/soak.jsonl" >"$out/soak_stdout.txt" 2>"$out/soak_stderr.txt" &
pid=$!
echo "seconds,pid_rss_kib,gpu_used_mib,process_gpu_mib" >"$out/samples.csv"
start=$(date +%s%N)
while kill -0 "$pid" 2>/dev/null; do
  now=$(date +%s%N)
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
  used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
  proc=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', ' -v p="$pid" '$1 == p {print $2}')
  printf '%d.%03d,%s,%s,%s\n' $(((now - start) / 1000000000)) $(((now - start) / 1000000 % 1000)) \
    "${rss:-}" "${used:-}" "${proc:-}" >>"$out/samples.csv"
  sleep 2
done
wait "$pid"
echo "castor-run exit $?" >>"$out/soak_stdout.txt"
python3 "$(dirname "$0")/soak_summary.py" "$out" "${SOAK_BATCH:-256}" | tee "$out/summary.txt"
