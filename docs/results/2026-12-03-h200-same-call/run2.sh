#!/usr/bin/env bash
# The tiny plans compiled with recompute (whose plain batch norms have no running update, so the
# tuner weighs the Ex API against the graph API's engines): CPU/CUDA agreement with the graph API
# forced (CASTOR_BN_API=graph) and on an empty cache, both with the tuner's log; then ResNet-50
# fp16 b256 beside PyTorch eager AMP and torch.compile again; ResNet-50 bf16, ResNeXt-50 and
# MobileNetV2 with the runtime of b6dbc14 against the runtime before the mask (d40a3c9).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for mode in graph empty; do
  export CASTOR_TUNING_CACHE=/tmp/tc-agree-$mode && mkdir -p $CASTOR_TUNING_CACHE
  envs="CASTOR_TUNING_LOG=1"; [ $mode = graph ] && envs="$envs CASTOR_BN_API=graph"
  env $envs timeout 100 "$bin/castor_cuda_tests" "$carry/plans-cheap" --steps 3 \
    --dump "output grad:layer2.0.downsample.1.bias" --dump "output grad:layer2.0.bn2.bias" >"$OUT/agreement_$mode.txt" 2>&1
  echo "agreement $mode: rc $? $(tail -1 "$OUT/agreement_$mode.txt")"
  grep -E "FAIL" "$OUT/agreement_$mode.txt" | cut -c1-200 | head -8
  cp $CASTOR_TUNING_CACHE/*.txt "$OUT/cache_agree_$mode.txt"
done
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
run r50_after bin r50_fp16_b256 50
timeout 230 python3 $carry/torch_resnet50.py --modes compile-fp16-cl,amp-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
run r50_after bin r50_fp16_b256 50
for m in r50_bf16_b256 resnext50_32x4d_fp16_b128 mobilenet_v2_fp16_b128; do
  run ${m}_before bin-a $m 30
  run ${m}_after bin $m 30
done
