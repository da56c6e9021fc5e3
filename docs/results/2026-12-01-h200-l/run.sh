#!/usr/bin/env bash
# Device call: the GPU tests after sharing the batch norm's Ex descriptors and the dimension list.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin; P=$carry/plans
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:$PWD/$carry/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt; : >$log
timeout 110 $bin/castor_cuda_kernel_tests >$out/kernels.txt 2>&1; echo "kernel tests exit $?: $(tail -1 $out/kernels.txt)" >>$log
timeout 40 $bin/castor_conv_tests >$out/conv.txt 2>&1; echo "conv tests exit $?: $(tail -1 $out/conv.txt)" >>$log
timeout 80 $bin/castor_cuda_tests $P --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?: $(tail -1 $out/agreement.txt)" >>$log
cat $log
