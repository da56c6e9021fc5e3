#!/usr/bin/env bash
# Device call (H200) for batch_norm_apply with clip_max (ReLU6's fused batch norm recomputed):
# the CUDA kernel tests of the batch norms (batch_norm_apply clip_max=1 among them), the CPU/CUDA
# agreement of the tiny ReLU6 model's plans with and without --recompute cheap (and the tiny
# ReLU model's cheap plans beside them), then MobileNetV2 (batch 128, fp16) fused with and
# without --recompute cheap, alternating, and PyTorch eager AMP of the same model last.
# Each result goes to $OUT as soon as it exists, so a call cut short still returns what ran.
set -u
source bench/gpu_env.sh
res=$OUT/res; mkdir -p $res
p=$carry/plans
timeout 60 $bin/castor_cuda_kernel_tests batch_norm >$res/kernels.txt 2>&1; echo "kernel tests exit $?"
tail -3 $res/kernels.txt
timeout 60 $bin/castor_cuda_tests $p/tiny_relu6_fp16_adamw.plan $p/tiny_relu6_fp16_adamw_cheap.plan \
  $p/tiny_relu6_bf16_adamw.plan $p/tiny_relu6_bf16_adamw_cheap.plan $p/tiny_fp16_adamw_cheap.plan \
  $p/tiny_bf16_adamw_cheap.plan --steps 3 >$res/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS|agree" $res/agree.txt | tail -8
export CASTOR_TUNING_CACHE=/tmp/tc-models
for round in 1 2; do
  for m in mobilenet_v2_fp16_b128 mobilenet_v2_fp16_b128_cheap; do
    timeout 45 $bin/castor-run bench $p/$m.plan --device cuda --steps 20 --warmup 5 --json >$res/$m.$round.json 2>$res/$m.$round.err
    echo "== $m round $round: rc $? $(python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d['img_per_s'], 'img/s, peak', d['peak_gib'], 'GiB, predicted', round(d['predicted_peak_bytes']/2**30, 3), 'kernel ms', d['kernel_total_ms'])" $res/$m.$round.json 2>&1 | tail -1)"
  done
done
timeout 60 python3 bench/torch_torchvision.py --model mobilenet_v2 --modes amp-fp16-cl --batch 128 >$res/torch.txt 2>&1
echo "torch rc $?"; tail -2 $res/torch.txt
