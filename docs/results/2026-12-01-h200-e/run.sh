#!/usr/bin/env bash
# Device call: fused BN-ReLU kernels; ResNet-50 fused vs unfused beside PyTorch.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin; P=$carry/plans
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt; : >$log
timeout 120 $bin/castor_cuda_kernel_tests >$out/kernels.txt 2>&1; echo "kernel tests exit $?: $(tail -1 $out/kernels.txt)" >>$log
b() { # plan label
  timeout 100 $bin/castor-run bench $P/$1.plan --device cuda --steps 20 --warmup 5 --json 2>>$out/bench_stderr.txt | tail -1 |
    sed "s|^{|{\"plan\": \"$1\", \"run\": \"$2\", |" >>$out/castor.jsonl
}
# Cold start: the first bench of the fused ResNet-50 on an empty tuning cache, timed whole.
s=$(date +%s.%N); b r50_fp16_b256 cold; e=$(date +%s.%N); echo "cold fused r50 fp16 bench wall $(echo "$e - $s" | bc) s" >>$log
b r50_fp16_b256_nofuse warm0
for r in 1 2; do b r50_fp16_b256 $r; b r50_fp16_b256_nofuse $r; done
b r50_bf16_b256 warm0; b r50_bf16_b256_nofuse warm0
for r in 1 2; do b r50_bf16_b256 $r; b r50_bf16_b256_nofuse $r; done
timeout 200 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl,amp-bf16-cl --batch 256 >$out/torch.jsonl 2>$out/torch_stderr.txt
python3 - $out >>$log <<'PY'
import json, sys
o = sys.argv[1]
rows = [json.loads(l) for l in open(o + '/castor.jsonl') if l.startswith('{')]
for r in rows:
    print(r['plan'], r['run'], r.get('img_per_s'), r.get('peak_gib'), r.get('kernel_ms'), r.get('kernel_total_ms'), r.get('loss_first'), r.get('loss_last'))
for l in open(o + '/torch.jsonl'):
    if l.startswith('{'):
        t = json.loads(l); print('torch', t['mode'], t['img_per_s'], t['peak_gib'])
PY
cat $log
