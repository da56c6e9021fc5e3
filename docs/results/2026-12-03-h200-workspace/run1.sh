#!/usr/bin/env bash
# Device call (H200) after the default workspace limit became 1/32 of the arena (1 GiB at most):
# the plans' CPU/CUDA agreement; ResNet-50 fp16 and bf16 (batch 256) with each tuning candidate's
# time logged (CASTOR_TUNING_LOG=1: the stem's own and padded candidates side by side); the other
# CNNs at batch 128; PyTorch eager AMP and torch.compile for ResNet-50 fp16 and bf16 in the same call.
set -u
source bench/gpu_env.sh
res=/tmp/res; mkdir -p $res
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >$res/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" $res/agree.txt | tail -4
export CASTOR_TUNING_CACHE=/tmp/tc-models
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'], 'predicted GiB', round(d['predicted_peak_bytes']/2**30, 3), 'workspace MiB', round(d['allocated_bytes']['workspace']/2**20, 1))
print('convs', {k: v for k, v in d['op_ms'].items() if k.startswith('conv')})
" "$1"; }
for p in r50_fp16_b256 r50_bf16_b256; do
  CASTOR_TUNING_LOG=1 timeout 120 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 30 --warmup 5 --json >$res/$p.json 2>$res/$p.err
  echo "== $p: rc $?"; summ $res/$p.json; grep "x:nhwc=256,3,224,224" $res/$p.err | sort -k3,3 -k5,5g | head -40
done
for p in mobilenet_v2_fp16_b128 resnext50_32x4d_fp16_b128 densenet121_fp16_b128; do
  timeout 120 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 20 --warmup 5 --json >$res/$p.json 2>$res/$p.err
  echo "== $p: rc $?"; summ $res/$p.json
done
timeout 150 python3 $carry/torch_resnet50.py --modes amp-fp16-cl,compile-fp16-cl --batch 256 2>>$res/torch.err | tee $res/torch_r50_fp16.jsonl
timeout 150 python3 $carry/torch_torchvision.py --model resnet50 --modes amp-bf16-cl,compile-bf16-cl --batch 256 \
  2>>$res/torch.err | tee $res/torch_r50_bf16.jsonl
tar -C /tmp -czf "$OUT/results.tgz" res
