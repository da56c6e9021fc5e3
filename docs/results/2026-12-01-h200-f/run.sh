#!/usr/bin/env bash
# Device call: CPU/CUDA agreement on fused plans, ResNet-50 AMP comparison with fusion, three more
# CNNs fused vs unfused beside PyTorch, cold start.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin; P=$carry/plans
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:$PWD/$carry/lib:${LD_LIBRARY_PATH:-}"
log=$out/tests.txt; : >$log
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
b() {
  timeout 100 $bin/castor-run bench $P/$1.plan --device cuda --steps 20 --warmup 5 --json 2>>$out/bench_stderr.txt | tail -1 |
    sed "s|^{|{\"plan\": \"$1\", \"run\": \"$2\", |" >>$out/castor.jsonl
}
for m in resnext50_32x4d vgg11_bn densenet121; do
  b ${m}_fp16_b128_auto 0; b ${m}_fp16_b128_none 0; b ${m}_fp16_b128_auto 1; b ${m}_fp16_b128_none 1
  timeout 60 python3 $carry/torch_torchvision.py --model $m --modes amp-fp16-cl --batch 128 >>$out/torch.jsonl 2>>$out/torch_stderr.txt
done
python3 - $out >>$log <<'PY'
import json, sys
o = sys.argv[1]
for r in [json.loads(l) for l in open(o + '/castor.jsonl') if l.startswith('{')]:
    print(r['plan'], r['run'], r.get('img_per_s'), r.get('peak_gib'), r.get('kernel_ms'), r.get('loss_first'), r.get('loss_last'))
for l in open(o + '/torch.jsonl'):
    if l.startswith('{'):
        t = json.loads(l); print('torch', t['model'], t['mode'], t['img_per_s'], t['peak_gib'])
PY
cat $log
