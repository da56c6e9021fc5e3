#!/usr/bin/env bash
# Max pooling's taps recorded in the forward, consecutive casts in one launch (castor-schedule-casts),
# and the batch norm's statistics from the convolution's epilogue (conv-stats): the GPU kernel
# tests, the CPU/CUDA agreement of the tiny plans, then ResNet-50 fp16 b256: the runtime before
# (bin-a) on the plan before (r50_fp16_b256_old), the new runtime on the new plan without the
# conv-stats way (CASTOR_CONV_STATS=0) and with it; each first on an empty tuning cache of its own
# (load_s: build and tuning), then from it; each kernel timed once in each run.
set -uo pipefail
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "FAIL|max_pool2d with|consecutive casts|conv2d \+ batch" "$OUT/kernel_tests.txt" | head -30
timeout 240 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 >"$OUT/agreement.txt" 2>&1
echo "agreement: rc $? $(tail -1 "$OUT/agreement.txt")"
run() { # label, binary dir, plan, env
  export CASTOR_TUNING_CACHE=/tmp/tc-$1
  mkdir -p "$CASTOR_TUNING_CACHE"
  env $4 CASTOR_PROFILE_KERNELS=1 "$carry/$2/castor-run" bench "$carry/plans/$3.plan" --steps 50 --warmup 5 --json >"$OUT/$1_$round.txt" 2>&1
  echo "== $1 round $round: rc $? $(grep -o '"img_per_s": [0-9.]*' "$OUT/$1_$round.txt") $(grep -o '"median_ms": [0-9.]*' "$OUT/$1_$round.txt") $(grep -o '"peak_gib": [0-9.]*' "$OUT/$1_$round.txt") $(grep -o '"load_s": [0-9.]*' "$OUT/$1_$round.txt")"
  python3 - "$OUT/$1_$round.txt" <<'PY'
import json, re, sys
cat = {}
n = 0
for l in open(sys.argv[1]):
    m = re.match(r"castor-run: kernel \d+ ([\d.]+) ms kernel #\d+ \((\S+)", l)
    if m:
        n += 1
        op = m[2]
        key = "cast" if op == "cast" else "pool" if op.startswith("max_pool") else "bn" if op.startswith("batch_norm") else "conv" if op.startswith("conv2d") else "other"
        cat[key] = cat.get(key, 0) + float(m[1])
    if l.startswith("{"):
        d = json.loads(l)
        ways = d.get("fusion", {}).get("ways")
print(f"   kernels timed {n}: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(cat.items())) + f" ms; ways {ways}")
PY
}
for round in 1 2; do
  run before bin-a r50_fp16_b256_old ""
  run nostats bin r50_fp16_b256 CASTOR_CONV_STATS=0
  run stats bin r50_fp16_b256 ""
done
