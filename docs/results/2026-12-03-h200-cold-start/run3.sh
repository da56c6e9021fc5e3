#!/usr/bin/env bash
# Device call (H200), on a freshly started machine: ResNet-50 fp16's cold start (the first
# process, then a second one, each on an empty tuning cache; then from the filled cache), with
# the tuner's split of its time between building and timing candidates; the convolution GPU test
# and the plans' CPU/CUDA agreement; ResNet-50 bf16 beside PyTorch eager AMP and torch.compile in
# bf16; DenseNet-121 (batch 128, fp16) --fuse auto and --fuse none beside PyTorch eager AMP and
# torch.compile of the same model.
set -u
source bench/gpu_env.sh
res=/tmp/res; mkdir -p $res
cold() { # name; an empty cache
  export CASTOR_TUNING_CACHE=/tmp/tc-$1; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
  start=$(date +%s.%N)
  timeout 120 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json \
    >$res/$1.json 2>$res/$1.err
  echo "== $1: rc $? wall $(python3 -c "import time;print(round(time.time()-$start,2))") s; $(python3 -c "
import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print('load_s', d['load_s'], 'first_step_s', d['first_step_s'])" $res/$1.json)"
  grep -E "tuning:|error" $res/$1.err | head -2
}
cold cold_first
cold cold_second
start=$(date +%s.%N)
timeout 60 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json >$res/warm.json 2>$res/warm.err
echo "== warm (cache of cold_second): wall $(python3 -c "import time;print(round(time.time()-$start,2))") s"; grep tuning: $res/warm.err
timeout 240 $bin/castor_conv_tests >$res/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "^FAIL|PASS:" $res/conv.txt | tail -4
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >$res/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" $res/agree.txt | tail -4
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.3})
" "$1"; }
export CASTOR_TUNING_CACHE=/tmp/tc-models
timeout 120 $bin/castor-run bench $carry/plans/r50_bf16_b256.plan --device cuda --steps 30 --warmup 5 --json \
  >$res/r50_bf16_b256.json 2>$res/r50_bf16_b256.err; echo "== r50_bf16_b256: rc $?"; summ $res/r50_bf16_b256.json
timeout 200 python3 $carry/torch_torchvision.py --model resnet50 --modes amp-bf16-cl,compile-bf16-cl --batch 256 \
  2>>$res/torch.err | tee $res/torch_resnet50_bf16.jsonl
for f in "" _nofuse; do
  timeout 80 $bin/castor-run bench $carry/plans/densenet121_fp16_b128$f.plan --device cuda --steps 20 --warmup 5 --json \
    >$res/densenet121$f.json 2>$res/densenet121$f.err
  echo "== densenet121$f: rc $?"; summ $res/densenet121$f.json
done
timeout 220 python3 $carry/torch_torchvision.py --model densenet121 --modes amp-fp16-cl,compile-fp16-cl --batch 128 \
  2>>$res/torch.err | tee $res/torch_densenet121.jsonl
tail -2 $res/torch.err
tar -C /tmp -czf "$OUT/results.tgz" res
