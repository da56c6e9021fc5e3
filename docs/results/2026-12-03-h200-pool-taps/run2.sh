#!/usr/bin/env bash
# The runtime with max pooling's taps from the forward, consecutive casts in one typed launch and
# the conv-stats way, against the runtime and plans before (bin-a, *_old plans), beside PyTorch in
# the same call: the GPU kernel tests and the tiny plans' CPU/CUDA agreement; ResNet-50 fp16 b256
# before/after, alternating, each first on an empty tuning cache of its own (load_s: build and
# tuning), then from it; PyTorch eager AMP and torch.compile (channels-last); then ResNet-50 bf16,
# MobileNetV2 and ResNeXt-50 (fp16 b128) before/after.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 "$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "^FAIL" "$OUT/kernel_tests.txt" | head
timeout 200 "$bin/castor_cuda_tests" "$carry/plans" --steps 3 >"$OUT/agreement.txt" 2>&1
echo "agreement: rc $? $(tail -1 "$OUT/agreement.txt")"
log=$OUT/castor.jsonl
run() { # label, binary dir, plan, steps
  export CASTOR_TUNING_CACHE=/tmp/tc-$1
  mkdir -p "$CASTOR_TUNING_CACHE"
  timeout 120 "$carry/$2/castor-run" bench "$carry/plans/$3.plan" --steps $4 --warmup 5 --json >/tmp/run.json 2>/tmp/run.err
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
print(f"== {label}: rc {rc} img/s {d['img_per_s']} median {d['median_ms']} ms peak {d['peak_gib']} GiB load {d.get('load_s')} s kernel {d['kernel_total_ms']} ms ways {ways}")
PY
  grep -iE "error" /tmp/run.err | head -3
}
for round in 1 2; do
  run r50_before bin-a r50_fp16_b256_old 50
  run r50_after bin r50_fp16_b256 50
done
timeout 330 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
tail -2 /tmp/torch.err
run r50_after bin r50_fp16_b256 50
run r50_before bin-a r50_fp16_b256_old 50
run r50bf16_before bin-a r50_bf16_b256 30
run r50bf16_after bin r50_bf16_b256 30
for m in mobilenet_v2 resnext50_32x4d; do
  run ${m}_before bin-a ${m}_fp16_b128_old 30
  run ${m}_after bin ${m}_fp16_b128 30
done
