#!/usr/bin/env bash
# Device call for the shared row walk of the own batch-norm-ReLU kernels (walkRows in
# runtime/cuda/kernels/batch_norm_relu.cu; behaviour unchanged): the kernel tests of the batch
# norms on this build, then castor-bn-bench of main's build ($carry/bin-a, carried beside it)
# and this build on ResNet-50's batch-norm shapes in fp16 and bf16; then the
# CPU/CUDA agreement of the tiny ReLU and ReLU6 plans (the composed fused kernels' batch-norm step
# takes its attributes through plan::isBatchNormReluActivationAttr).
set -u
source bench/gpu_env.sh
res=$OUT/res; mkdir -p $res
timeout 90 $bin/castor_cuda_kernel_tests batch_norm >$res/kernels.txt 2>&1; echo "kernel tests exit $?"
tail -1 $res/kernels.txt
for dt in f16 bf16; do
  for round in 1; do
    for side in a b; do
      b=$bin/castor-bn-bench; [ $side = a ] && b=$carry/bin-a/castor-bn-bench
      timeout 60 $b --batch 256 --dtype $dt --iters 20 >$res/bn_${dt}_${side}_$round.jsonl 2>&1
    done
  done
done
python3 - $res <<'PY'
import glob, json, statistics, sys, collections
t = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/bn_*.jsonl"):
    dt, side = f.split("/")[-1].split("_")[1:3]
    for line in open(f):
        if line.startswith("{"):
            d = json.loads(line)
            t[(dt, side)].append(d.get("ms", 0))
for dt in ("f16", "bf16"):
    a, b = sum(t[(dt, "a")]), sum(t[(dt, "b")])
    print(dt, "main %.3f ms, row walk %.3f ms, ratio %.3f" % (a, b, b / a if a else float("nan")))
PY
export CASTOR_TUNING_CACHE=/tmp/tc-agree
p=$carry/plans
timeout 200 $bin/castor_cuda_tests $p/tiny_fp16_adamw.plan $p/tiny_relu6_fp16_adamw.plan --steps 3 >$res/agree.txt 2>&1; echo "agreement exit $?"
grep -E "^PASS|^FAIL" $res/agree.txt | tail -3
