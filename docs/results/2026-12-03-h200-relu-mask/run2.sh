#!/usr/bin/env bash
# The tiny plans compiled with recompute (cheap), CPU/CUDA agreement on empty tuning caches: the
# runtime as it is, and with the convolution's statistics and the batch-norm-ReLU mask off
# (CASTOR_CONV_STATS=0 CASTOR_BN_RELU_MASK=0); then ResNet-50 fp16 b256 with the tuner's log of
# the batch-norm-ReLU pairs (CASTOR_TUNING_LOG=1), and its kernel profile.
set -u
source bench/gpu_env.sh
for mode in default off; do
  export CASTOR_TUNING_CACHE=/tmp/tc-agree-$mode && mkdir -p $CASTOR_TUNING_CACHE
  envs=""; [ $mode = off ] && envs="CASTOR_CONV_STATS=0 CASTOR_BN_RELU_MASK=0"
  env $envs timeout 200 "$bin/castor_cuda_tests" "$carry/plans-cheap" --steps 3 >"$OUT/agreement_$mode.txt" 2>&1
  echo "agreement $mode: rc $? $(tail -1 "$OUT/agreement_$mode.txt")"
  grep -E "FAIL" "$OUT/agreement_$mode.txt" | cut -c1-220 | head -8
done
export CASTOR_TUNING_CACHE=/tmp/tc-r50 && mkdir -p $CASTOR_TUNING_CACHE
CASTOR_TUNING_LOG=1 timeout 120 "$bin/castor-run" bench "$carry/plans/r50_fp16_b256.plan" --steps 30 --warmup 5 --json \
  >"$OUT/r50_log.txt" 2>&1
grep -E "batch_norm_relu.pair" "$OUT/r50_log.txt" | grep -E "add" | head -30 | cut -c1-250
grep -E "does not fit|error" "$OUT/r50_log.txt" | head
CASTOR_PROFILE_KERNELS=1 timeout 120 "$bin/castor-run" bench "$carry/plans/r50_fp16_b256.plan" --steps 30 --warmup 5 \
  --json >"$OUT/r50_profile.txt" 2>&1
tail -1 "$OUT/r50_profile.txt" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['img_per_s'], d['peak_gib'], d['fusion']['ways'], {k:v for k,v in d['op_ms'].items() if 'batch_norm' in k})"
