#!/usr/bin/env bash
# ResNeXt-50 32x4d and MobileNetV2 (fp16, batch 128), plans compiled by the compiler of 75ac753
# (--fuse auto and --fuse none), the runtime of b6dbc14, beside PyTorch eager AMP and
# torch.compile of the same model in this call. Castor: a tuning cache per model, the fused plan
# tunes it first; 20 event-timed steps, the median.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
log=$OUT/castor.jsonl
run() { # label, plan, cache
  export CASTOR_TUNING_CACHE=/tmp/tc-$3 && mkdir -p $CASTOR_TUNING_CACHE
  timeout 80 "$bin/castor-run" bench "$carry/plans/$2.plan" --steps 20 --warmup 5 --json >/tmp/run.json 2>/tmp/run.err
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
for m in mobilenet_v2 resnext50_32x4d; do
  run ${m}_auto ${m}_fp16_b128 $m
  run ${m}_none ${m}_fp16_b128_nofuse $m
  run ${m}_auto ${m}_fp16_b128 $m
  run ${m}_none ${m}_fp16_b128_nofuse $m
  timeout 150 python3 bench/torch_torchvision.py --model $m --modes amp-fp16-cl,compile-fp16-cl --batch 128 \
    2>>/tmp/torch_tv.err | tee "$OUT/torch_$m.jsonl"
done
tail -2 /tmp/torch_tv.err
