#!/usr/bin/env bash
# One device call: the GPU tests, then Castor's training steps (castor-run bench) and PyTorch's of
# the same models in the same call, every figure as a JSON line in $OUT. Run on the GPU machine
# from the repository root with what scripts/build_gpu.sh carries (gpu-carry/):
#
#   bench/device_call.sh [--plans "PLAN..."] [--models "MODEL..." --precisions "fp16 bf16"
#                        --batch N [--fuse "auto none"]] [--builds "bin bin-a"] [--rounds N]
#                        [--steps N] [--cold] [--env "VAR=VALUE..."] [--peers MODES]
#                        [--tests "kernels conv agreement amp bn-bench"]
#
#   --plans       plans of gpu-carry/plans, without .plan, named MODEL_PRECISION_bBATCH[_VARIANT]
#                 (r50_fp16_b256, mobilenet_v2_fp16_b128_nofuse, r50_fp16_b256_cheap, ...)
#   --models ...  the same, spelt out: MODEL_PRECISION_bBATCH for each model and precision
#                 (resnet50's plans are r50_*), with _nofuse for --fuse none
#   --builds      binary folders of gpu-carry, alternated within each round (default bin; bin-a
#                 is a second runtime carried beside it, e.g. main before the change: the check
#                 that a change costs no speed, each plan's median per build and their ratio)
#   --rounds      rounds over every plan and build (default 1); each label (plan, and build when
#                 there are several) has a tuning cache of its own, which its first run tunes
#   --steps       event-timed steps of each run (default 30, after 5 warm-up steps)
#   --cold        the cold start: every run on an empty tuning cache and a fresh CUDA_CACHE_PATH,
#                 one step and no warm-up (its load_s, first_step_s and wall_s are the figures)
#   --env         assignments for every castor-run (CASTOR_TUNING_LOG=1, CASTOR_CONV_STATS=0, ...)
#   --peers       PyTorch modes run once for each model and batch after Castor's rounds, e.g.
#                 amp-fp16-cl,compile-fp16-cl (gpu-carry/torch_resnet50.py for resnet50, else
#                 bench/torch_torchvision.py; TORCH_LIMIT seconds each, default 300)
#   --tests       run first: kernels (castor_cuda_kernel_tests $KERNEL_FILTER), conv
#                 (castor_conv_tests), agreement (castor_cuda_tests $AGREEMENT_PLANS, default every
#                 plan of gpu-carry/plans, 3 steps), amp (the 100-step ResNet-50 loss comparison
#                 against PyTorch AMP, test/torch_reference/run_amp_comparison.sh), bn-bench
#                 (castor-bn-bench, f16 and bf16, ResNet-50's batch-norm shapes at batch 256);
#                 TEST_LIMIT seconds each, default 300
#
# $OUT gets gpu.txt, castor.jsonl (bench/bench_row.sh: one line a run, with its label, build,
# assignments and wall time), torch.jsonl (one line a PyTorch mode), tests.jsonl (one line a test:
# exit status, seconds, its last PASS/FAIL line) with each test's output beside it,
# bn_bench_{f16,bf16}.jsonl, and summary.md (bench/summarize.py, when the call ran one model).
# docs/records/README.md says how a call's output becomes its records.
#
# Example, a runtime against the one before it and PyTorch (docs/records: 2026-12-03 same-call):
#   bench/device_call.sh --plans r50_fp16_b256 --builds "bin-a bin" --rounds 2 --steps 50 \
#     --peers amp-fp16-cl,compile-fp16-cl --tests "kernels agreement"
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
source "$(dirname "$0")/bench_row.sh"
plans=() models="" precisions="fp16" batch="" fuse="auto" builds="bin" rounds=1 steps=30 cold=0
envs="" peers="" tests=""
while [ $# -gt 0 ]; do
  [ "$1" = --cold ] && { cold=1; shift; continue; }
  [ $# -ge 2 ] || { echo "device_call.sh: $1 needs a value" >&2; exit 2; }
  case $1 in
    --plans) read -ra plans <<<"$2" ;;
    --models) models=$2 ;;
    --precisions) precisions=$2 ;;
    --batch) batch=$2 ;;
    --fuse) fuse=$2 ;;
    --builds) builds=$2 ;;
    --rounds) rounds=$2 ;;
    --steps) steps=$2 ;;
    --env) envs=$2 ;;
    --peers) peers=$2 ;;
    --tests) tests=$2 ;;
    *) echo "device_call.sh: unknown option $1 (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
  shift 2
done
for m in $models; do
  for p in $precisions; do
    for f in $fuse; do
      plans+=("$([ "$m" = resnet50 ] && echo r50 || echo "$m")_${p}_b${batch:?--models needs --batch}$([ "$f" = none ] && echo _nofuse)")
    done
  done
done
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

# One GPU test: its output in $OUT/NAME.txt, a line in $OUT/tests.jsonl.
run_test() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  timeout "${TEST_LIMIT:-300}" "$@" >"$OUT/$name.txt" 2>&1
  rc=$?
  python3 - "$name" "$rc" "$(($(date +%s) - t0))" "$OUT/$name.txt" "$*" <<'PY' | tee -a "$OUT/tests.jsonl"
import json, re, sys
name, rc, secs, path, cmd = sys.argv[1:]
last = [l.strip() for l in open(path, errors="replace") if re.match(r"\s*(PASS|FAIL)\b", l)]
print(json.dumps({"test": name, "rc": int(rc), "seconds": int(secs), "command": cmd,
                  "summary": last[-1] if last else None}))
PY
}
for t in $tests; do
  case $t in
    kernels) run_test kernel_tests "$bin/castor_cuda_kernel_tests" ${KERNEL_FILTER:-} ;;
    conv) run_test conv_tests "$bin/castor_conv_tests" ;;
    agreement) run_test agreement "$bin/castor_cuda_tests" ${AGREEMENT_PLANS:-$carry/plans} --steps 3 ;;
    amp) run_test amp env WORK=/tmp/amp test/torch_reference/run_amp_comparison.sh "$carry" "$OUT/amp" ;;
    bn-bench)
      for dt in f16 bf16; do
        timeout 120 "$bin/castor-bn-bench" --batch 256 --dtype "$dt" >"$OUT/bn_bench_$dt.jsonl" 2>&1
      done ;;
    *) echo "device_call.sh: unknown test $t" >&2 ;;
  esac
done

read -ra extra <<<"$envs"
[ "$cold" = 1 ] && steps=1 && export BENCH_WARMUP=0
for round in $(seq 1 "$rounds"); do
  for plan in "${plans[@]}"; do
    for b in $builds; do
      label=$plan; [ "$builds" != "${builds%% *}" ] && label=$plan-$b
      if [ "$cold" = 1 ]; then
        rm -rf "/tmp/tc-$label"
        bench_row "$label" "$b" "$plan" "$steps" CUDA_CACHE_PATH="/tmp/cuda-cache-$label-$round" "${extra[@]}"
      else
        bench_row "$label" "$b" "$plan" "$steps" "${extra[@]}"
      fi
    done
  done
done

# Several builds: each plan's median img/s per build, and each build's over the first's.
if [ "$builds" != "${builds%% *}" ]; then
  python3 - "$OUT/castor.jsonl" $builds <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
builds = sys.argv[2:]
for plan in dict.fromkeys(r["plan"] for r in rows):
    med = {b: statistics.median(v) for b in builds
           if (v := [r["img_per_s"] for r in rows if r["plan"] == plan and r["build"] == b])}
    print(f"{plan}:", ", ".join(f"{b} median {m:.1f} img/s" for b, m in med.items()),
          *(f"{b}/{builds[0]} {med[b] / med[builds[0]]:.4f}" for b in builds[1:] if b in med and builds[0] in med))
PY
fi

if [ -n "$peers" ]; then
  for mb in $(printf '%s\n' "${plans[@]}" | sed -E 's/^(.+)_(fp16|bf16|fp32)_b([0-9]+).*$/\1:\3/' | sort -u); do
    model=${mb%:*} b=${mb#*:}
    if [ "$model" = r50 ] && [ -f "$carry/torch_resnet50.py" ]; then
      cmd=(python3 "$carry/torch_resnet50.py")
    else
      cmd=(python3 bench/torch_torchvision.py --model "$([ "$model" = r50 ] && echo resnet50 || echo "$model")")
    fi
    timeout "${TORCH_LIMIT:-300}" "${cmd[@]}" --modes "$peers" --batch "$b" 2>/tmp/torch_stderr.txt |
      tee -a "$OUT/torch.jsonl"
    tail -3 /tmp/torch_stderr.txt
  done
  if [ "$(printf '%s\n' "${plans[@]}" | sed -E 's/_(fp16|bf16|fp32)_.*//' | sort -u | wc -l)" = 1 ]; then
    python3 bench/summarize.py "$OUT/castor.jsonl" "$OUT/torch.jsonl" "$OUT/gpu.txt" | tee "$OUT/summary.md"
  fi
fi
