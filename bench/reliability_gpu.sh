#!/usr/bin/env bash
# Faults on the GPU machine, from the repository root, with the plans of scripts/build_gpu.sh and
# bench/compile_reliability_plans.sh in gpu-carry/plans (docs/reliability.md):
#   1. test/training/nonfinite.py on the CUDA backend: NaN/inf planted at a random step (fp16
#      loss scaler, fp32 guard with --on-nonfinite stop and skip, fp32 without the guard);
#   2. test/training/full_disk.py: the disk fills during a save;
#   3. test/training/kill_resume.py: KILLS (default 100) kill -9 of saving runs;
#   4. test/training/state_check.py on the CUDA backend: NaN in a resumed state, skipped steps,
#      a diverging learning rate, state metadata (its plans: state_*.plan).
#
#   bench/reliability_gpu.sh [OUT_DIR]      # default $OUT; OUT_DIR/reliability.txt, kills.json
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
log="$out/reliability.txt"
: >"$log"
run="$bin/castor-run"
section() { echo "== $1 ($(date +%T))" >>"$log"; }
section "non-finite values, cuda"
timeout 200 python3 test/training/nonfinite.py --castor-run "$run" --plans "$carry/plans" --work /tmp/nonfinite \
  --device cuda >>"$log" 2>&1
echo "nonfinite exit $?" >>"$log"
section "full disk during a save, cuda"
timeout 120 python3 test/training/full_disk.py --castor-run "$run" --plan "$carry/plans/tiny_fp32_adamw.plan" \
  --work /tmp/full_disk --device cuda >>"$log" 2>&1
echo "full_disk exit $?" >>"$log"
section "kill -9 during saving runs, cuda"
timeout "${KILL_LIMIT:-400}" python3 test/training/kill_resume.py --castor-run "$run" \
  --plan "$carry/plans/mlp4096.plan" --work /tmp/kill_resume --kills "${KILLS:-100}" --device cuda --check-device cpu \
  --json "$out/kills.json" >>"$log" 2>&1
echo "kill_resume exit $?" >>"$log"
section "the state check, cuda"
timeout 300 python3 test/training/state_check.py --castor-run "$run" --plans "$carry/plans" --work /tmp/state_check \
  --device cuda >>"$log" 2>&1
echo "state_check exit $?" >>"$log"
