#!/usr/bin/env bash
# Device call (H200) for the two changes not yet run on a GPU: ReLU6 in the batch-norm fusion
# (clip_max) and the zero-padded-channel convolution candidates. The CUDA kernel tests (the fused
# batch-norm-ReLU with clip_max=1 in every way), the convolution tests (the padded stem), the plans'
# CPU/CUDA agreement (tiny_relu6_* among them); then MobileNetV2 (batch 128, fp16) --fuse auto and
# --fuse none twice each, ResNet-50 fp16 and bf16 (batch 256), beside PyTorch in the same call.
set -u
source bench/gpu_env.sh
res=/tmp/res; mkdir -p $res
timeout 240 $bin/castor_cuda_kernel_tests >$res/kernels.txt 2>&1; echo "kernel tests exit $?"
grep -E "^FAIL|PASS:|clip_max" $res/kernels.txt | tail -12
timeout 200 $bin/castor_conv_tests >$res/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "^FAIL|PASS:|pad[48]" $res/conv.txt | tail -12
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >$res/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:|relu6" $res/agree.txt | tail -6
summ() { python3 -c "
import json,sys,collections
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'], 'load_s', d['load_s'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.3})
print('ways', dict(collections.Counter(t['choice'] for t in d['tuning'] if t['op'] == 'batch_norm_relu_training')))
print('stem', [t['choice'] for t in d['tuning'] if t['op'].startswith('conv2d') and 'pad' in t['choice']])
" "$1"; }
export CASTOR_TUNING_CACHE=/tmp/tc-models
for round in 1 2; do
  for f in "" _nofuse; do
    timeout 80 $bin/castor-run bench $carry/plans/mobilenet_v2_fp16_b128$f.plan --device cuda --steps 20 --warmup 5 \
      --json >$res/mobilenet_v2$f.$round.json 2>$res/mobilenet_v2$f.$round.err
    echo "== mobilenet_v2$f round $round: rc $?"; summ $res/mobilenet_v2$f.$round.json
  done
done
for p in r50_fp16_b256 r50_bf16_b256; do
  timeout 120 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 30 --warmup 5 --json >$res/$p.json 2>$res/$p.err
  echo "== $p: rc $?"; summ $res/$p.json
done
tar -C /tmp -czf "$OUT/results.tgz" res
