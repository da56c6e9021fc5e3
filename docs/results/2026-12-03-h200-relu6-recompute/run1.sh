#!/usr/bin/env bash
# Device call (H200) for batch_norm_apply with clip_max (ReLU6's fused batch norm recomputed):
# the CUDA kernel tests of the batch norms (batch_norm_apply clip_max=1 among them), the plans'
# CPU/CUDA agreement (tiny_relu6_{fp16,bf16}_adamw_cheap among them), then MobileNetV2 (batch 128,
# fp16) with and without --recompute cheap, twice each, alternating.
set -u
source bench/gpu_env.sh
res=/tmp/res; mkdir -p $res
timeout 150 $bin/castor_cuda_kernel_tests batch_norm >$res/kernels.txt 2>&1; echo "kernel tests exit $?"
grep -E "^FAIL|PASS:|apply.*clip_max" $res/kernels.txt | tail -8
timeout 150 $bin/castor_cuda_tests $carry/plans --steps 3 >$res/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:|relu6.*cheap" $res/agree.txt | tail -8
export CASTOR_TUNING_CACHE=/tmp/tc-models
for round in 1 2; do
  for p in mobilenet_v2_fp16_b128 mobilenet_v2_fp16_b128_cheap; do
    timeout 60 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 20 --warmup 5 --json >$res/$p.$round.json 2>$res/$p.$round.err
    echo "== $p round $round: rc $? $(python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d['img_per_s'], 'img/s, peak', d['peak_gib'], 'GiB, predicted', round(d['predicted_peak_bytes']/2**30, 3), 'kernel ms', d['kernel_total_ms'])" $res/$p.$round.json)"
  done
done
tar -C /tmp -czf "$OUT/results.tgz" res
