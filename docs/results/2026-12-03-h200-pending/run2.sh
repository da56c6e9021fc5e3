#!/usr/bin/env bash
# Device call (H200): PyTorch beside run1's Castor figures, then Castor again in the same call:
# MobileNetV2 (batch 128) and ResNet-50 bf16 (batch 256), eager AMP and torch.compile.
set -u
source bench/gpu_env.sh
res=/tmp/res2; mkdir -p $res
export CASTOR_TUNING_CACHE=/tmp/tc-models
for p in mobilenet_v2_fp16_b128 mobilenet_v2_fp16_b128_nofuse r50_bf16_b256; do
  timeout 120 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 20 --warmup 5 --json >$res/$p.json 2>$res/$p.err
  echo "== $p: rc $? $(python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d['img_per_s'], 'img/s', d['peak_gib'], 'GiB')" $res/$p.json)"
done
timeout 200 python3 $carry/torch_torchvision.py --model mobilenet_v2 --modes amp-fp16-cl,compile-fp16-cl --batch 128 \
  2>>$res/torch.err | tee $res/torch_mobilenet_v2.jsonl
timeout 200 python3 $carry/torch_torchvision.py --model resnet50 --modes amp-bf16-cl,compile-bf16-cl --batch 256 \
  2>>$res/torch.err | tee $res/torch_resnet50_bf16.jsonl
tar -C /tmp -czf "$OUT/results.tgz" res2
