#!/usr/bin/env bash
# Device call (H200): the tuner allowed three of cuDNN's runtime-compiled engines for each data
# gradient with an accumulated gradient, their built plans kept on disk. ResNet-50 fp16 (batch
# 256): cold start on an empty tuning cache, then warm (choices and compiled plans from the
# cache); bf16 and --fuse none; then PyTorch eager AMP and torch.compile (channels-last) of the
# same model in the same call.
set -u
source bench/gpu_env.sh
timeout 200 $bin/castor_conv_tests 2>&1 | grep -E "\+acc \[graph\]|FAIL|tuning:" | head -40
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('kernels', d['kernel_ms'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.2})
acc=[t['choice'].split(', ')[-1] for t in d.get('tuning', []) if t['op'] == 'conv2d_backward_data' and ('unfused' in t['choice'] or 'cudnn+add' in t['choice'])]
print(len(acc), 'accumulating layers:', {c: acc.count(c) for c in sorted(set(acc))})
" "$1"; }
export CASTOR_TUNING_CACHE=/tmp/tc-run2; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
for mode in cold warm; do
  start=$(date +%s.%N)
  timeout 150 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 30 --warmup 5 --json \
    >/tmp/r50_$mode.json 2>/tmp/r50_$mode.err
  echo "== fp16 $mode: rc $? wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
  grep -E "tuning:|error" /tmp/r50_$mode.err | head -3
  summ /tmp/r50_$mode.json
  cp /tmp/r50_$mode.json "$OUT/r50_fp16_$mode.json"
done
ls $CASTOR_TUNING_CACHE; du -sh $CASTOR_TUNING_CACHE/*.plans 2>/dev/null; ls $CASTOR_TUNING_CACHE/*.plans | wc -l
start=$(date +%s.%N)
timeout 60 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json >/dev/null 2>&1
echo "== fp16 warm, one step: wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
for p in r50_bf16_b256 r50_fp16_b256_nofuse; do
  timeout 150 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 30 --warmup 5 --json >/tmp/$p.json 2>/tmp/$p.err
  echo "== $p: rc $?"; summ /tmp/$p.json; cp /tmp/$p.json "$OUT/$p.json"
done
timeout 330 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
tail -3 /tmp/torch.err
