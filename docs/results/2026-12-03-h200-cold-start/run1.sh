#!/usr/bin/env bash
# Device call (H200): cuDNN's runtime-compiled engines built ahead on worker threads
# (runtime/cuda/tuning/compile_ahead.h). The convolution GPU test (its third round compiles
# ahead, then builds without compiling), the plans' CPU/CUDA agreement, then the cold start of
# ResNet-50 fp16 (batch 256) on an empty tuning cache with and without the compilations ahead,
# and from the filled cache; then ResNet-50 fp16 and bf16 beside PyTorch eager AMP and
# torch.compile (channels-last) in the same call.
set -u
source bench/gpu_env.sh
nproc
timeout 240 $bin/castor_conv_tests >/tmp/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "^FAIL|PASS:|compiled ahead|tuning:|compiled engines" /tmp/conv.txt | tail -12
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >/tmp/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" /tmp/agree.txt | tail -4
cp /tmp/conv.txt /tmp/agree.txt "$OUT/"
cold() { # name, extra env; an empty cache each time
  export CASTOR_TUNING_CACHE=/tmp/tc-$1; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
  start=$(date +%s.%N)
  env $2 timeout 120 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json \
    >/tmp/$1.json 2>/tmp/$1.err
  echo "== $1: rc $? wall $(python3 -c "import time;print(round(time.time()-$start,2))") s; $(python3 -c "
import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print('load_s', d['load_s'], 'first_step_s', d['first_step_s'])" /tmp/$1.json)"
  grep -E "tuning:|error" /tmp/$1.err | head -2; cp /tmp/$1.json /tmp/$1.err "$OUT/"
}
cold cold_ahead ""
cold cold_serial CASTOR_TUNING_COMPILE_THREADS=0
# Warm: the cache the first cold run filled.
export CASTOR_TUNING_CACHE=/tmp/tc-cold_ahead
start=$(date +%s.%N)
timeout 60 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json >/tmp/warm.json 2>/tmp/warm.err
echo "== warm: wall $(python3 -c "import time;print(round(time.time()-$start,2))") s"; grep tuning: /tmp/warm.err
summ() { python3 -c "
import json,sys,collections
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'], 'load_s', d['load_s'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.3})
print('bn ways', dict(collections.Counter(t['choice'] for t in d['tuning'] if t['op'] == 'batch_norm_relu_training')))
" "$1"; }
for p in r50_fp16_b256 r50_bf16_b256; do
  timeout 120 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 30 --warmup 5 --json \
    >/tmp/$p.json 2>/tmp/$p.err; echo "== $p rc $?"; grep -E "error" /tmp/$p.err | head -3
  summ /tmp/$p.json; cp /tmp/$p.json "$OUT/"
done
timeout 300 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
tail -3 /tmp/torch.err
