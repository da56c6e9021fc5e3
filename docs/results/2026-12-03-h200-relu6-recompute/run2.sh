#!/usr/bin/env bash
# Device call 2 (warm machine, right after call 1): the agreement plans call 1's 60 s limit cut
# off (its nchw runs of all six plans and the nhwc runs of the fp16 ReLU6 plans had passed).
source bench/gpu_env.sh; p=$carry/plans; mkdir -p $OUT/res
timeout 105 $bin/castor_cuda_tests $p/tiny_relu6_bf16_adamw.plan $p/tiny_relu6_bf16_adamw_cheap.plan \
  $p/tiny_fp16_adamw_cheap.plan $p/tiny_bf16_adamw_cheap.plan --steps 3 >$OUT/res/agree2.txt 2>&1
echo "agreement exit $?"; grep -E "PASS|FAIL" $OUT/res/agree2.txt | awk '{print $1, $2, $4, $NF}'
