#!/usr/bin/env bash
# ResNet-50 fp16 b256: the runtime of b6dbc14 beside the runtime before the ReLU's mask (d40a3c9,
# gpu-carry/bin-a) and PyTorch eager AMP and torch.compile, all in this call; then the GPU kernel
# tests and the tiny plans' CPU/CUDA agreement on the tuning cache they leave, with the tuner's log
# and the gradients of the layers that disagreed in two earlier calls, and the cache itself.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
log=$OUT/castor.jsonl
run() { # label, binary dir, plan, steps
  export CASTOR_TUNING_CACHE=/tmp/tc-$1
  mkdir -p "$CASTOR_TUNING_CACHE"
  timeout 100 "$carry/$2/castor-run" bench "$carry/plans/$3.plan" --steps $4 --warmup 5 --json >/tmp/run.json 2>/tmp/run.err
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
print(f"== {label}: rc {rc} img/s {d['img_per_s']} median {d['median_ms']} ms peak {d['peak_gib']} GiB kernel {d['kernel_total_ms']} ms ways {d.get('fusion', {}).get('ways')}")
PY
  grep -iE "error|does not fit" /tmp/run.err | head -3
}
for round in 1 2; do
  run r50_before bin-a r50_fp16_b256 50
  run r50_after bin r50_fp16_b256 50
done
timeout 260 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
tail -3 /tmp/torch.err
run r50_after bin r50_fp16_b256 50
run r50_before bin-a r50_fp16_b256 50
unset CASTOR_TUNING_CACHE
export CASTOR_TUNING_CACHE=/tmp/castor-tuning
timeout 100 "$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "^FAIL" "$OUT/kernel_tests.txt" | head
cp -r /tmp/castor-tuning "$OUT/cache_after_kernel_tests"
CASTOR_TUNING_LOG=1 timeout 120 "$bin/castor_cuda_tests" "$carry/plans-cheap" --steps 3 \
  --dump "output grad:layer2.0.downsample.1.bias" --dump "output grad:layer2.0.bn2.bias" >"$OUT/agreement_cheap.txt" 2>&1
echo "agreement cheap: rc $? $(tail -1 "$OUT/agreement_cheap.txt")"
grep FAIL "$OUT/agreement_cheap.txt" | cut -c1-200 | head -4
cp -r /tmp/castor-tuning "$OUT/cache_after_agreement"
