#!/usr/bin/env bash
# Device call (H200), on a freshly started machine: the cold start of the first castor-run on
# the machine, then where it goes, against the runtime before this change ("before"): the
# runtime-compiled engines compiled ahead in the background while the layers are tuned, and the
# tuner's two-round timing. Each cold run has an empty tuning cache and, after the very first, a
# fresh CUDA_CACHE_PATH (the driver's cache of compiled kernels, which the first compilation of
# cuDNN's runtime-compiled engines fills), so that every one compiles as on a fresh machine.
# Then castor_conv_tests (the compile-ahead round among them) and the tuned step's speed from
# each runtime's cache, alternating.
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
cold before_r50 castor-run-before r50_fp16_b256 CUDA_CACHE_PATH=/tmp/cc1
cold new_r50 castor-run r50_fp16_b256 CUDA_CACHE_PATH=/tmp/cc2
cold new_r50_serial castor-run r50_fp16_b256 "CUDA_CACHE_PATH=/tmp/cc3 CASTOR_TUNING_COMPILE_THREADS=0"
cold before_mnv2 castor-run-before mobilenet_v2_fp16_b128 CUDA_CACHE_PATH=/tmp/cc4
cold new_mnv2 castor-run mobilenet_v2_fp16_b128 CUDA_CACHE_PATH=/tmp/cc5
cold new_rx50 castor-run resnext50_32x4d_fp16_b128 CUDA_CACHE_PATH=/tmp/cc6
cold before_rx50 castor-run-before resnext50_32x4d_fp16_b128 CUDA_CACHE_PATH=/tmp/cc7
timeout 150 $bin/castor_conv_tests >$res/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "FAIL|PASS|compiled ahead|tuning:" $res/conv.txt | tail -8
# The step with each runtime's choices (the new runtime runs both; only the choices differ).
for round in 1 2; do
  for c in before_r50 new_r50; do
    export CASTOR_TUNING_CACHE=/tmp/tc-$c
    timeout 60 $bin/castor-run bench $p/r50_fp16_b256.plan --device cuda --steps 30 --warmup 5 --json >$res/speed_$c.$round.json 2>$res/speed_$c.$round.err
    echo "== speed, $c's choices, round $round: rc $? $(summary $res/speed_$c.$round.json)"
  done
done
for c in before_mnv2 new_mnv2; do
  export CASTOR_TUNING_CACHE=/tmp/tc-$c
  timeout 60 $bin/castor-run bench $p/mobilenet_v2_fp16_b128.plan --device cuda --steps 20 --warmup 5 --json >$res/speed_$c.json 2>$res/speed_$c.err
  echo "== speed, $c's choices: rc $? $(summary $res/speed_$c.json)"
done
tar -C /tmp -czf $OUT/caches.tgz tc-first tc-before_r50 tc-new_r50 2>/dev/null
