#!/usr/bin/env bash
# Device call (H200): CPU/CUDA agreement of the training plans (batched running-statistics
# updates and AdamW); ResNet-50 fp16 (batch 256) beside PyTorch eager AMP and torch.compile; then
# three more torchvision CNNs at batch 128 in fp16, compiled with --fuse auto and --fuse none,
# each beside PyTorch eager AMP (channels-last) in this call: ResNeXt-50 32x4d (grouped
# convolutions), MobileNetV2 (depthwise convolutions, inverted residuals) and DenseNet-121.
set -u
source bench/gpu_env.sh
timeout 150 $bin/castor_cuda_tests $carry/plans --steps 3 >/tmp/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" /tmp/agree.txt | tail -6; cp /tmp/agree.txt "$OUT/"
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('kernels', d['kernel_ms'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.25})
" "$1"; }
export CASTOR_TUNING_CACHE=/tmp/tc-run4; mkdir -p $CASTOR_TUNING_CACHE
for p in r50_fp16_b256 r50_fp16_b256; do
  timeout 100 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 30 --warmup 5 --json >/tmp/$p.json 2>/tmp/$p.err
  echo "== $p: rc $?"; summ /tmp/$p.json
done
cp /tmp/r50_fp16_b256.json "$OUT/"
timeout 300 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 2>/tmp/torch.err | tee "$OUT/torch_r50.jsonl"
for m in resnext50_32x4d mobilenet_v2 densenet121; do
  for f in "" _nofuse; do
    timeout 80 $bin/castor-run bench $carry/plans/${m}_fp16_b128$f.plan --device cuda --steps 20 --warmup 5 --json \
      >/tmp/$m$f.json 2>/tmp/$m$f.err
    echo "== $m$f: rc $?"; summ /tmp/$m$f.json; cp /tmp/$m$f.json "$OUT/"
  done
  timeout 90 python3 bench/torch_torchvision.py --model $m --modes amp-fp16-cl --batch 128 2>>/tmp/torch_tv.err | tee "$OUT/torch_$m.jsonl"
done
