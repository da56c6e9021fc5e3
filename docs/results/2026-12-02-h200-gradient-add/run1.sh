#!/usr/bin/env bash
# Device call (H200): the convolution tests with accumulated data gradients (castor_conv_tests),
# then ResNet-50 fp16 (batch 256) with castor-fuse-gradient-add on an empty tuning cache (cold
# start: compile is on this machine, so load + tune + first step), warm, and with the tuner
# allowed to try cuDNN's runtime-compiled engines (CASTOR_TUNING_MAX_COMPILED=8) on another
# empty cache; the choices of the accumulating layers and the time by op of each.
set -u
source bench/gpu_env.sh
timeout 200 $bin/castor_conv_tests 2>&1 | grep -E "acc|FAIL|cache|tuning:" | head -60
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.2})
acc=[t for t in d.get('tuning', []) if 'accumulate' in t['name'] or t['choice'].startswith(('unfused', 'cudnn+add'))]
print(len(acc), 'accumulating layers:', sorted(set(t['choice'] for t in acc)))
" "$1"; }
for mode in cold warm compiled; do
  case $mode in
    cold) export CASTOR_TUNING_CACHE=/tmp/tc-cold; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE ;;
    warm) ;;
    compiled) export CASTOR_TUNING_CACHE=/tmp/tc-comp; mkdir -p $CASTOR_TUNING_CACHE; export CASTOR_TUNING_MAX_COMPILED=8 ;;
  esac
  start=$(date +%s.%N)
  timeout 150 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 30 --warmup 5 --json \
    >/tmp/r50_$mode.json 2>/tmp/r50_$mode.err
  echo "== $mode: rc $? wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
  grep -E "tuning:|error" /tmp/r50_$mode.err | head -3
  summ /tmp/r50_$mode.json
  cp /tmp/r50_$mode.json "$OUT/r50_fp16_$mode.json"
done
unset CASTOR_TUNING_MAX_COMPILED
export CASTOR_TUNING_CACHE=/tmp/tc-cold
for p in tiny_fp16_adamw tiny_bf16_adamw tiny_fp32_adamw; do
  timeout 60 $bin/castor-run train $carry/plans/$p.plan --device cuda --steps 5 --seed 3 2>&1 | tail -1
done
