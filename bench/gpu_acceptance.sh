#!/usr/bin/env bash
# Every GPU check of the CUDA backend in one run on the GPU machine, from the repository root,
# with what scripts/build_gpu.sh put in gpu-carry/: the GPU tests (single kernels, convolutions,
# CPU/CUDA agreement of whole training steps in both layouts), compute-sanitizer memcheck on a
# small training plan, the ResNet-50 benchmark beside PyTorch (bench/device_call.sh) and
# the 100-step loss comparison with PyTorch AMP (test/torch_reference/run_amp_comparison.sh).
#
#   bench/gpu_acceptance.sh [OUT_DIR]      # default $OUT
#
# Each part has a time limit (about 10 minutes in all) and the next runs whatever the last gave. Results (9 files):
# OUT_DIR/tests.txt (tests, memcheck, logs), OUT_DIR/bench/{gpu.txt,castor.jsonl,torch.jsonl,
# summary.md,fusion.jsonl}, OUT_DIR/amp/amp_resnet50.{json,txt,log}.
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out/bench" "$out/amp"
log="$out/tests.txt"
section() { echo "== $1 ($(date +%T))" >>"$log"; }
# The kernel tests run cuDNN's batch norm under each API (CASTOR_BN_API=ex, =graph, tuned); the
# graph API's engines compile at run time, hence the longer limit.
section "single kernels"
timeout "${KERNEL_LIMIT:-150}" "$bin/castor_cuda_kernel_tests" >/tmp/kernels.txt 2>&1
echo "kernel tests exit $?" >>"$log"
grep -E "^FAIL|^PASS:|^FAIL:" /tmp/kernels.txt | tail -40 >>"$log"
grep -E "bn graph|bn ex|bn tuned" /tmp/kernels.txt | grep -c "^PASS" | sed 's/^/batch-norm cases passing under a forced or tuned API: /' >>"$log"
grep -vE "^(PASS|FAIL)" /tmp/kernels.txt | sort | uniq -c | sort -rn | head -8 >>"$log"
section "convolutions"; timeout 60 "$bin/castor_conv_tests" 2>&1 | tail -8 >>"$log"
section "CPU/CUDA agreement"; timeout 240 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 2>&1 | tail -70 >>"$log"
for fault in lr bn-bias; do # a real bug must fail the same criterion
  timeout 120 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 --plant "$fault" >/tmp/planted.txt 2>&1
  echo "planted $fault: exit $? (must be 1), $(grep -c ' FAIL$' /tmp/planted.txt) failing comparisons" >>"$log"
done
section "memcheck"
timeout 120 compute-sanitizer --tool memcheck "$bin/castor-run" train "$carry/plans/tiny_fp16_adamw.plan" \
  --steps 3 --device cuda 2>&1 | tail -12 >>"$log"
echo "memcheck exit ${PIPESTATUS[0]}" >>"$log"
section "bench"
OUT="$out/bench" timeout "${BENCH_LIMIT:-300}" bench/device_call.sh --plans "r50_fp16_b256 r50_bf16_b256 r50_fp32_b256" \
  --steps 20 --peers "${TORCH_MODES:-amp-fp16-cl,fp32,amp-bf16-cl,compile-fp16-cl}" >/tmp/bench.log 2>&1
grep -v '^{' /tmp/bench.log | tail -20 >>"$log"
echo "batch-norm layers in the fp16 plan's tuning cache, by chosen API:" >>"$log"
grep -h "^batch_norm" /tmp/tc-r50_fp16_b256/*.txt | cut -f2 | sed 's/:.*//' | sort | uniq -c >>"$log"
section "fusion: fused and unfused ResNet-50 plans, alternately (median img/s of two runs each)"
for p in fp16 bf16; do
  for plan in r50_${p}_b256 r50_${p}_b256_nofuse r50_${p}_b256 r50_${p}_b256_nofuse; do
    timeout 60 "$bin/castor-run" bench "$carry/plans/$plan.plan" --device cuda --steps 20 --warmup 5 --json 2>/dev/null |
      tail -1 | sed "s|^{|{\"plan\": \"$plan\", |" >>"$out/bench/fusion.jsonl"
  done
done
python3 - "$out/bench/fusion.jsonl" >>"$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
for p in ('fp16', 'bf16'):
    f = [r['img_per_s'] for r in rows if r['plan'] == f'r50_{p}_b256']
    u = [r['img_per_s'] for r in rows if r['plan'] == f'r50_{p}_b256_nofuse']
    if f and u:
        print(f"{p}: fused {statistics.median(f):.0f} img/s, unfused {statistics.median(u):.0f}: "
              f"fused/unfused {statistics.median(f) / statistics.median(u):.3f}")
PY
section "amp comparison"
WORK=/tmp/amp timeout "${AMP_LIMIT:-150}" test/torch_reference/run_amp_comparison.sh "$carry" "$out/amp" \
  >/tmp/amp.log 2>&1
echo "amp exit $?" >>"$log"; tail -5 /tmp/amp.log >>"$log"
section "train (castor-run train, synthetic data, the main job's GPU path)"
timeout 60 "$bin/castor-run" train "$carry/plans/r50_fp16_b256.plan" --device cuda --steps 30 --data synthetic \
  2>&1 | tail -3 >>"$log"
section "end"
grep -E "PASS|FAIL|pass|fail|worst|exit" "$log" | tail -30; cat "$out/bench/summary.md"
