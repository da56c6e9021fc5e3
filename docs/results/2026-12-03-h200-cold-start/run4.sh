#!/usr/bin/env bash
# Device call (H200), on a freshly started machine. (a) Where the first process's extra
# cold-start time goes: ResNet-50 fp16, each run on an empty tuning cache: the first process with
# no runtime-compiled engine tried (CASTOR_TUNING_MAX_COMPILED=0); a second with the default
# three per accumulating data gradient (compiled for the first time on this machine); a third,
# the same, once everything was loaded and compiled before. (b) Why bf16 convolutions are slower
# than fp16 ones: fp16 and bf16 benched into one tuning cache, whose entries (engine, median ms
# per layer signature) are printed side by side; then bf16 with every candidate cuDNN offers
# timed (CASTOR_TUNING_MAX_CANDIDATES=0) on an empty cache.
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
export CASTOR_TUNING_CACHE=/tmp/tc-both; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
for p in r50_fp16_b256 r50_bf16_b256; do
  timeout 100 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 20 --warmup 5 --json >$res/$p.json 2>$res/$p.err
  echo "== $p: rc $? $(python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d['img_per_s'], 'img/s', {k: v for k, v in d['op_ms'].items() if k.startswith('conv')})" $res/$p.json)"
done
cp $CASTOR_TUNING_CACHE/*.txt $res/both_cache.txt
python3 - $res/both_cache.txt <<'PY' | tee $res/conv_f16_vs_bf16.txt
import sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith('#') or not line.startswith('conv2d'): continue
    key, cand, ms = line.rstrip('\n').split('\t')
    parts = key.split('|'); dtype = parts[1]; rest = '|'.join(parts[:1] + parts[2:])
    rows.setdefault(rest, {})[dtype] = (cand, float(ms))
tot = {'f16': 0.0, 'bf16': 0.0}
for rest, d in sorted(rows.items(), key=lambda kv: -kv[1].get('bf16', ('', 0))[1]):
    if 'f16' in d and 'bf16' in d:
        tot['f16'] += d['f16'][1]; tot['bf16'] += d['bf16'][1]
        print('%.3f %.3f %s | f16 %s | bf16 %s' % (d['f16'][1], d['bf16'][1], rest[:90], d['f16'][0][:40], d['bf16'][0][:40]))
print('sum over signatures: f16 %.2f ms, bf16 %.2f ms' % (tot['f16'], tot['bf16']))
PY
export CASTOR_TUNING_CACHE=/tmp/tc-all; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
CASTOR_TUNING_MAX_CANDIDATES=0 timeout 150 $bin/castor-run bench $carry/plans/r50_bf16_b256.plan --device cuda --steps 20 --warmup 5 --json \
  >$res/bf16_all.json 2>$res/bf16_all.err
echo "== bf16, every candidate: rc $? $(python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d['img_per_s'], 'img/s', d['load_s'], 'load_s', {k: v for k, v in d['op_ms'].items() if k.startswith('conv')})" $res/bf16_all.json)"
tar -C /tmp -czf "$OUT/results.tgz" res
