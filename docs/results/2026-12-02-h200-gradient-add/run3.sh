#!/usr/bin/env bash
# Device call (H200): the convolution tests (accumulated data gradients; compiled engines read
# back from disk in the second round) and the CPU/CUDA agreement of the training plans with the
# multi-tensor AdamW; then ResNet-50 fp16 (batch 256) cold and warm, beside PyTorch eager AMP and
# torch.compile (channels-last) in the same call.
set -u
source bench/gpu_env.sh
timeout 150 $bin/castor_conv_tests >/tmp/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "^FAIL|compiled engines|^PASS|tuning:" /tmp/conv.txt | tail -8
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >/tmp/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" /tmp/agree.txt | tail -12; cp /tmp/conv.txt /tmp/agree.txt "$OUT/"
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('kernels', d['kernel_ms'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.1})
" "$1"; }
export CASTOR_TUNING_CACHE=/tmp/tc-run3; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
for mode in cold warm; do
  start=$(date +%s.%N)
  timeout 150 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 30 --warmup 5 --json \
    >/tmp/r50_$mode.json 2>/tmp/r50_$mode.err
  echo "== fp16 $mode: rc $? wall $(python3 -c "import time;print(round(time.time()-$start,1))") s"
  grep -E "tuning:|error" /tmp/r50_$mode.err | head -3
  summ /tmp/r50_$mode.json; cp /tmp/r50_$mode.json "$OUT/r50_fp16_$mode.json"
done
timeout 330 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 \
  2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
