#!/usr/bin/env bash
# Device call (H200): the convolution GPU test (its third round compiles ahead, then builds
# without compiling); ResNet-50 fp16's cold start on empty tuning caches with 0, 1, 4 and 16
# compile-ahead threads, after one warm run has loaded the libraries; then ResNeXt-50 and
# MobileNetV2 (batch 128, fp16), --fuse auto and --fuse none twice each, beside PyTorch eager AMP
# and torch.compile of the same models in the same call.
set -u
source bench/gpu_env.sh
timeout 240 $bin/castor_conv_tests >/tmp/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "^FAIL|PASS:|compiled ahead|tuning:|compiled engines" /tmp/conv.txt | tail -12
cp /tmp/conv.txt "$OUT/"
export CASTOR_TUNING_CACHE=/tmp/tc-preload
timeout 60 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json >/dev/null 2>&1
for t in 0 1 4 16; do
  export CASTOR_TUNING_CACHE=/tmp/tc-threads$t; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
  start=$(date +%s.%N)
  CASTOR_TUNING_COMPILE_THREADS=$t timeout 120 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda \
    --steps 1 --warmup 0 --json >/tmp/cold$t.json 2>/tmp/cold$t.err
  echo "== cold, $t threads: rc $? wall $(python3 -c "import time;print(round(time.time()-$start,2))") s; $(python3 -c "
import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print('load_s', d['load_s'], 'first_step_s', d['first_step_s'])" /tmp/cold$t.json)"
  grep -E "tuning:|built ahead|error" /tmp/cold$t.err | head -3; cp /tmp/cold$t.json /tmp/cold$t.err "$OUT/"
done
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.3})
" "$1"; }
export CASTOR_TUNING_CACHE=/tmp/tc-models
for m in resnext50_32x4d mobilenet_v2; do
  for round in 1 2; do
    for f in "" _nofuse; do
      timeout 80 $bin/castor-run bench $carry/plans/${m}_fp16_b128$f.plan --device cuda --steps 20 --warmup 5 --json \
        >/tmp/$m$f.json 2>/tmp/$m$f.err
      echo "== $m$f round $round: rc $?"; summ /tmp/$m$f.json; cp /tmp/$m$f.json "$OUT/$m${f}_round$round.json"
    done
  done
  timeout 200 python3 $carry/torch_torchvision.py --model $m --modes amp-fp16-cl,compile-fp16-cl --batch 128 \
    2>>/tmp/torch_tv.err | tee "$OUT/torch_$m.jsonl"
done
tail -3 /tmp/torch_tv.err
