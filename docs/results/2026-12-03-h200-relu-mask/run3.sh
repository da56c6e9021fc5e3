#!/usr/bin/env bash
# The runtime with the mask recorded by the own batch-norm-ReLU forward (a template parameter of
# the element-wise pass), the plain batch norm from the convolution's sums, beside PyTorch in the
# same call: the GPU kernel tests, then the tiny plans' CPU/CUDA agreement on the same tuning
# cache; castor-bn-bench; ResNet-50 fp16 b256 with the mask and without it
# (CASTOR_BN_RELU_MASK=0), each on an empty tuning cache of its own, then from it; PyTorch eager
# AMP and torch.compile (channels-last); ResNet-50 fp16 again with its kernel profile, ResNet-50
# bf16, MobileNetV2 and ResNeXt-50 (fp16 b128); "before" is the runtime before this work (d40a3c9,
# gpu-carry/bin-a) on the same plans.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 "$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "^FAIL" "$OUT/kernel_tests.txt" | head
timeout 150 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 >"$OUT/agreement.txt" 2>&1
echo "agreement: rc $? $(tail -1 "$OUT/agreement.txt")"
grep FAIL "$OUT/agreement.txt" | cut -c1-200 | head -5
timeout 60 "$bin/castor-bn-bench" --batch 256 --dtype f16 >"$OUT/bn_bench.jsonl" 2>&1
grep -E '"(apply|backward|forward recording the mask|backward from the mask)"' "$OUT/bn_bench.jsonl" | grep -E '56x56x256|stem' | cut -c1-140
log=$OUT/castor.jsonl
run() { # label, env, plan, steps [, binary dir]
  export CASTOR_TUNING_CACHE=/tmp/tc-$1
  mkdir -p "$CASTOR_TUNING_CACHE"
  env $2 timeout 120 "$carry/${5:-bin}/castor-run" bench "$carry/plans/$3.plan" --steps $4 --warmup 5 --json >/tmp/run.json 2>/tmp/run.err
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
bn = {k: v for k, v in d["op_ms"].items() if "batch_norm" in k}
print(f"== {label}: rc {rc} img/s {d['img_per_s']} median {d['median_ms']} ms peak {d['peak_gib']} GiB load {d.get('load_s')} s kernel {d['kernel_total_ms']} ms ways {d.get('fusion', {}).get('ways')} {bn}")
PY
  grep -iE "error|does not fit" /tmp/run.err | head -3
}
for round in 1 2; do
  run r50_before CASTOR_BN_RELU_MASK=1 r50_fp16_b256 50 bin-a
  run r50_mask CASTOR_BN_RELU_MASK=1 r50_fp16_b256 50
  run r50_nomask CASTOR_BN_RELU_MASK=0 r50_fp16_b256 50
done
timeout 300 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
tail -2 /tmp/torch.err
run r50_mask CASTOR_BN_RELU_MASK=1 r50_fp16_b256 50
CASTOR_TUNING_CACHE=/tmp/tc-r50_mask CASTOR_PROFILE_KERNELS=1 timeout 100 "$bin/castor-run" bench \
  "$carry/plans/r50_fp16_b256.plan" --steps 30 --warmup 5 --json >"$OUT/r50_profile.txt" 2>&1
run r50bf16 CASTOR_BN_RELU_MASK=1 r50_bf16_b256 30
run mobilenet_v2 CASTOR_BN_RELU_MASK=1 mobilenet_v2_fp16_b128 30
run resnext50 CASTOR_BN_RELU_MASK=1 resnext50_32x4d_fp16_b128 30
