#!/usr/bin/env bash
# The runtime of 53dcf95 (the mask-recording pass within two blocks a multiprocessor) beside the
# runtime before this work (d40a3c9, gpu-carry/bin-a) and PyTorch, one call: the GPU kernel tests,
# then the tiny plans' CPU/CUDA agreement on the tuning cache they left (as every call runs it)
# with this runtime, with the runtime before, and with this runtime's new ways off
# (CASTOR_CONV_STATS=0 CASTOR_BN_RELU_MASK=0), then on an empty cache; ResNet-50 fp16 b256
# before/after alternating (each first on an empty tuning cache of its own); PyTorch eager AMP and
# torch.compile; ResNet-50 fp16 after with its kernel profile; ResNet-50 bf16, MobileNetV2 and
# ResNeXt-50 (fp16 b128) before/after.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 "$bin/castor_cuda_kernel_tests" >"$OUT/kernel_tests.txt" 2>&1
echo "kernel tests: rc $? $(tail -1 "$OUT/kernel_tests.txt")"
grep -E "^FAIL" "$OUT/kernel_tests.txt" | head
cp -r /tmp/castor-tuning /tmp/tc-kernel-tests
agree() { # label, binary dir, cache, env
  CASTOR_TUNING_CACHE=$3 env $4 timeout 60 "$carry/$2/castor_cuda_tests" "$carry/plans" --steps 3 >"$OUT/agreement_$1.txt" 2>&1
  echo "agreement $1: rc $? $(tail -1 "$OUT/agreement_$1.txt")"
}
agree after bin /tmp/castor-tuning ""
grep FAIL "$OUT/agreement_after.txt" | cut -c1-200 | head -4
cp -r /tmp/tc-kernel-tests /tmp/tc-k2 && agree before bin-a /tmp/tc-k2 ""
cp -r /tmp/tc-kernel-tests /tmp/tc-k3 && agree after_off bin /tmp/tc-k3 "CASTOR_CONV_STATS=0 CASTOR_BN_RELU_MASK=0"
mkdir -p /tmp/tc-empty && agree after_empty bin /tmp/tc-empty ""
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
bn = {k: v for k, v in d["op_ms"].items() if "batch_norm" in k}
print(f"== {label}: rc {rc} img/s {d['img_per_s']} median {d['median_ms']} ms peak {d['peak_gib']} GiB load {d.get('load_s')} s kernel {d['kernel_total_ms']} ms ways {d.get('fusion', {}).get('ways')} {bn}")
PY
  grep -iE "error|does not fit" /tmp/run.err | head -3
}
for round in 1 2; do
  run r50_before bin-a r50_fp16_b256 50
  run r50_after bin r50_fp16_b256 50
done
timeout 240 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
run r50_after bin r50_fp16_b256 50
CASTOR_TUNING_CACHE=/tmp/tc-r50_after CASTOR_PROFILE_KERNELS=1 timeout 60 "$bin/castor-run" bench \
  "$carry/plans/r50_fp16_b256.plan" --steps 30 --warmup 5 --json >"$OUT/r50_profile.txt" 2>&1
for m in r50_bf16_b256 resnext50_32x4d_fp16_b128 mobilenet_v2_fp16_b128; do
  run ${m}_before bin-a $m 30
  run ${m}_after bin $m 30
done
