#!/usr/bin/env bash
# Device call (H200), on a freshly started machine: where the first process's extra cold-start
# time goes. ResNet-50 fp16, each run on an empty tuning cache: (1) the first process, with no
# runtime-compiled engine tried (CASTOR_TUNING_MAX_COMPILED=0); (2) a second process with the
# default three per accumulating data gradient (24 engines, compiled for the first time on this
# machine); (3) a third, the same, once everything was loaded and compiled before.
set -u
source bench/gpu_env.sh
res=/tmp/res; mkdir -p $res
cold() { # name, env
  export CASTOR_TUNING_CACHE=/tmp/tc-$1; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
  start=$(date +%s.%N)
  env $2 timeout 120 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json \
    >$res/$1.json 2>$res/$1.err
  echo "== $1 ($2): rc $? wall $(python3 -c "import time;print(round(time.time()-$start,2))") s; $(python3 -c "
import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print('load_s', d['load_s'], 'first_step_s', d['first_step_s'])" $res/$1.json)"
  grep -E "tuning:|error" $res/$1.err | head -2
}
cold first_no_compiled CASTOR_TUNING_MAX_COMPILED=0
cold second_compiled ""
cold third_compiled ""
tar -C /tmp -czf "$OUT/results.tgz" res
