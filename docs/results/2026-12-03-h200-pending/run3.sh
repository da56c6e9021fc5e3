#!/usr/bin/env bash
# Device call (H200): ResNet-50 fp16 and bf16 (batch 256) compiled with --workspace-limit 512MiB,
# so that the stem's padded candidates (the padded input, 256x224x224x8 halves = 196 MiB) fit the
# workspace: which engine the tuner takes for the 3-channel stem, and the step's throughput. The plans:
#   castor compile models/resnet50.onnx --init kaiming --batch 256 --train --precision {bf16,fp16} \
#     --optimizer adamw --lr 1e-3 --weight-decay 0.01 --workspace-limit 512MiB -o r50_{p}_b256_ws512.plan
set -u
source bench/gpu_env.sh
res=/tmp/res3; mkdir -p $res
export CASTOR_TUNING_CACHE=/tmp/tc-ws512
for p in r50_bf16_b256_ws512 r50_fp16_b256_ws512; do
  timeout 120 $bin/castor-run bench gpu-carry-packed/$p.plan --device cuda --steps 30 --warmup 5 --json >$res/$p.json 2>$res/$p.err
  echo "== $p: rc $?"
  python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('conv ops', {k: v for k, v in d['op_ms'].items() if k.startswith('conv')})
print('stem', [(t['op'], t['choice']) for t in d['tuning'] if t['name'] == '/conv1/Conv'])
" $res/$p.json
  tail -1 $res/$p.err
done
cp $CASTOR_TUNING_CACHE/*.txt $res/
tar -C /tmp -czf "$OUT/results3.tgz" res3
