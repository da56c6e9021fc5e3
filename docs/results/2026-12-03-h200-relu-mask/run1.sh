#!/usr/bin/env bash
# The own batch-norm-ReLU forward with a residual recording the ReLU's mask for its backward
# (which reads it instead of y): the GPU kernel tests, the tiny plans' CPU/CUDA agreement, the
# kernels' bandwidth at ResNet-50's shapes (castor-bn-bench), and ResNet-50 fp16 b256 with the
# mask and without it (CASTOR_BN_RELU_MASK=0), alternating, each on a tuning cache of its own;
# the plain batch norm after a convolution may run from its sums (conv-stats) in both.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 "$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "^FAIL" "$OUT/kernel_tests.txt" | head
timeout 200 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 >"$OUT/agreement.txt" 2>&1
echo "agreement: rc $? $(tail -1 "$OUT/agreement.txt")"
timeout 60 "$bin/castor-bn-bench" --batch 256 --dtype f16 >"$OUT/bn_bench.jsonl" 2>&1
grep -E '"\+z|backward|mask' "$OUT/bn_bench.jsonl" | grep -E 'z"' | cut -c1-160
log=$OUT/castor.jsonl
run() { # label, env, plan, steps
  export CASTOR_TUNING_CACHE=/tmp/tc-$1
  mkdir -p "$CASTOR_TUNING_CACHE"
  env $2 timeout 120 "$bin/castor-run" bench "$carry/plans/$3.plan" --steps $4 --warmup 5 --json >/tmp/run.json 2>/tmp/run.err
  local rc=$?
  python3 - "$1" "$rc" /tmp/run.json "$log" <<'PY'
import json, sys
label, rc, path, log = sys.argv[1:]
try:
    d = json.loads(open(path).read().strip().splitlines()[-1])
except Exception as e:
    print(f"== {label}: rc {rc}, no JSON ({e})"); sys.exit()
d["label"] = label
open(log, "a").write(json.dumps(d) + "\n")
ways = d.get("fusion", {}).get("ways")
print(f"== {label}: rc {rc} img/s {d['img_per_s']} median {d['median_ms']} ms peak {d['peak_gib']} GiB load {d.get('load_s')} s kernel {d['kernel_total_ms']} ms bn {d['kernel_ms'].get('batch_norm')} ways {ways}")
PY
  grep -iE "error" /tmp/run.err | head -3
}
for round in 1 2; do
  run r50_nomask CASTOR_BN_RELU_MASK=0 r50_fp16_b256 50
  run r50_mask CASTOR_BN_RELU_MASK=1 r50_fp16_b256 50
done
CASTOR_TUNING_CACHE=/tmp/tc-r50_mask CASTOR_PROFILE_KERNELS=1 timeout 120 "$bin/castor-run" bench \
  "$carry/plans/r50_fp16_b256.plan" --steps 30 --warmup 5 --json >"$OUT/r50_profile.txt" 2>&1
run r50bf16_nomask CASTOR_BN_RELU_MASK=0 r50_bf16_b256 30
run r50bf16_mask CASTOR_BN_RELU_MASK=1 r50_bf16_b256 30
run resnext_nomask CASTOR_BN_RELU_MASK=0 resnext50_32x4d_fp16_b128 30
run resnext_mask CASTOR_BN_RELU_MASK=1 resnext50_32x4d_fp16_b128 30
