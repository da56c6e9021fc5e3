#!/usr/bin/env bash
# Device call (H200): the GPU tests on the runtime after the review refactoring: the convolution
# tests (accumulated data gradients, compiled plans read back) and the CPU/CUDA agreement of the
# training plans.
set -u
source bench/gpu_env.sh
timeout 150 $bin/castor_conv_tests >/tmp/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "^FAIL|compiled engines|^PASS|tuning:" /tmp/conv.txt | tail -6
timeout 120 $bin/castor_cuda_tests $carry/plans --steps 3 >/tmp/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" /tmp/agree.txt | tail -6; cp /tmp/conv.txt /tmp/agree.txt "$OUT/"
