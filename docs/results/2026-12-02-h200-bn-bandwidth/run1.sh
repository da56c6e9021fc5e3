#!/usr/bin/env bash
# Device call (H200): the GPU tests of the runtime at d79c2b0 (convolution tests; CPU/CUDA
# agreement of the test plans), then the own batch-norm-ReLU kernels' bandwidth on ResNet-50's
# shapes at batch 256 (castor-bn-bench), fp16 and bf16.
set -u
source bench/gpu_env.sh
timeout 150 $bin/castor_conv_tests >/tmp/conv.txt 2>&1; echo "conv tests exit $?"
grep -E "^FAIL|^PASS|compiled engines" /tmp/conv.txt | tail -5
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >/tmp/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" /tmp/agree.txt | tail -6
cp /tmp/conv.txt /tmp/agree.txt "$OUT/"
for dt in f16 bf16; do
  $bin/castor-bn-bench --batch 256 --dtype $dt --iters 20 | tee "$OUT/bn_$dt.jsonl" | \
    python3 -c "
import json,sys
for l in sys.stdin:
  d=json.loads(l); print('$dt', d['shape'].ljust(18), d['fn'].ljust(24), '%.3f ms'%d['ms'], '%5d GB/s'%d['GBps'])"
done
