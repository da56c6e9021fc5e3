#!/usr/bin/env bash
# Device call (H200), on a freshly started machine, runtime with the warm-up cut (a candidate
# whose warm-up run takes more than twice the best screen plus 2 ms is not run again) and the
# synthetic batch made in the input's dtype: the first castor-run on the machine (ResNet-50),
# then, each on an empty tuning cache and a fresh CUDA_CACHE_PATH (so that cuDNN's
# runtime-compiled engines compile as on a fresh machine), MobileNetV2, ResNeXt-50 and
# ResNet-50 again with this runtime and with the runtime before this work ("before"); the
# tuned steps' speed from each runtime's cache; PyTorch's time to its first step (eager AMP and
# torch.compile, process start included) and speed in the same call.
set -u
source bench/gpu_env.sh
res=$OUT/res; mkdir -p $res
p=$carry/plans
summary() { python3 -c "
import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('load_s', d['load_s'], 'first_step_s', d['first_step_s'], 'phases', d.get('load_phases_s'), 'img/s', d['img_per_s'])" $1 2>&1 | tail -1; }
cold() { # name, binary, plan, extra env
  export CASTOR_TUNING_CACHE=/tmp/tc-$1; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
  start=$(date +%s.%N)
  env $4 timeout 120 $bin/$2 bench $p/$3.plan --device cuda --steps 1 --warmup 0 --json >$res/$1.json 2>$res/$1.err
  echo "== $1 ($2 $3 $4): rc $? wall $(python3 -c "import time;print(round(time.time()-$start,2))") s; $(summary $res/$1.json)"
  grep -E "tuning:|load|error" $res/$1.err | head -3
}
cold first castor-run r50_fp16_b256 ""
cold new_mnv2 castor-run mobilenet_v2_fp16_b128 CUDA_CACHE_PATH=/tmp/cc1
cold before_mnv2 castor-run-before mobilenet_v2_fp16_b128 CUDA_CACHE_PATH=/tmp/cc2
cold new_rx50 castor-run resnext50_32x4d_fp16_b128 CUDA_CACHE_PATH=/tmp/cc3
cold new_r50 castor-run r50_fp16_b256 CUDA_CACHE_PATH=/tmp/cc4
cold before_r50 castor-run-before r50_fp16_b256 CUDA_CACHE_PATH=/tmp/cc5
for round in 1 2; do
  for c in before_r50 new_r50; do
    export CASTOR_TUNING_CACHE=/tmp/tc-$c
    timeout 60 $bin/castor-run bench $p/r50_fp16_b256.plan --device cuda --steps 30 --warmup 5 --json >$res/speed_$c.$round.json 2>$res/speed_$c.$round.err
    echo "== speed, $c's choices, round $round: rc $? $(summary $res/speed_$c.$round.json)"
  done
  for c in before_mnv2 new_mnv2; do
    export CASTOR_TUNING_CACHE=/tmp/tc-$c
    timeout 60 $bin/castor-run bench $p/mobilenet_v2_fp16_b128.plan --device cuda --steps 20 --warmup 5 --json >$res/speed_$c.$round.json 2>$res/speed_$c.$round.err
    echo "== speed, $c's choices, round $round: rc $? $(summary $res/speed_$c.$round.json)"
  done
done
for m in amp-fp16-cl compile-fp16-cl; do
  start=$(date +%s.%N)
  timeout 200 python3 $carry/torch_resnet50.py --modes $m --batch 256 --warmup 1 --iters 30 >$res/torch_$m.jsonl 2>$res/torch_$m.err
  echo "== torch $m: rc $? process wall $(python3 -c "import time;print(round(time.time()-$start,2))") s; $(tail -1 $res/torch_$m.jsonl)"
done
