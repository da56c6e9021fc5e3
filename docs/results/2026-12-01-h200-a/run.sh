#!/usr/bin/env bash
# Device call: the restructured runtime (op registry, CUDA backend by role, runtime/data and
# runtime/train, thin castor-run) against main before it (37d73f7), and the GPU tests.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >$log
echo "== kernels $(date +%T)" >>$log
timeout 170 $bin/castor_cuda_kernel_tests >/tmp/k.txt 2>&1; echo "kernel tests exit $?" >>$log
grep -E '^FAIL' /tmp/k.txt | head -20 >>$log; tail -1 /tmp/k.txt >>$log
echo "== conv $(date +%T)" >>$log
timeout 60 $bin/castor_conv_tests 2>&1 | tail -2 >>$log
echo "== agreement $(date +%T)" >>$log
timeout 150 $bin/castor_cuda_tests $carry/plans --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?" >>$log
grep -v 'ms/step\|tuning:' $out/agreement.txt | sed 's/  fixed-tolerance.*ints/  ints/' >>$log
for f in lr bn-bias; do timeout 60 $bin/castor_cuda_tests $carry/plans/tiny_fp16_adamw.plan $carry/plans/tiny_fp32_adamw.plan --steps 3 --plant $f >/tmp/p.txt 2>&1; echo "planted $f: exit $? (must be 1), failing comparisons $(grep -c ' FAIL$' /tmp/p.txt) of 8" >>$log; done
echo "== memcheck $(date +%T)" >>$log
timeout 90 compute-sanitizer --tool memcheck $bin/castor-run train $carry/plans/tiny_fp16_adamw.plan --steps 3 --device cuda 2>&1 | tail -2 >>$log
echo "== warm $(date +%T)" >>$log
for p in fp16 bf16; do timeout 60 $bin/castor-run bench $carry/plans/r50_${p}_b256.plan --device cuda --steps 3 --warmup 1 >/dev/null 2>&1; done
echo "== A/B bench (A = 37d73f7, B = this tree) $(date +%T)" >>$log
ROUNDS=3 STEPS=20 timeout 200 bench/ab_castor_run.sh $bin/castor-run-old $bin/castor-run $out/ab.jsonl \
  $carry/plans/r50_fp16_b256.plan $carry/plans/r50_bf16_b256.plan 2>&1 | grep -v '^{' >>$log
echo "== A/B train, synthetic data, 40 steps $(date +%T)" >>$log
for r in 1 2; do for side in old new; do b=$bin/castor-run; [ $side = old ] && b=$bin/castor-run-old
  echo -n "$side: " >>$log; timeout 60 $b train $carry/plans/r50_fp16_b256.plan --device cuda --steps 40 --data synthetic 2>&1 | tail -1 >>$log; done; done
echo "== PyTorch amp-fp16-cl, same call $(date +%T)" >>$log
timeout 120 python3 $carry/torch_resnet50.py --modes amp-fp16-cl --batch 256 >$out/torch.jsonl 2>/dev/null; tail -1 $out/torch.jsonl >>$log
echo "== end $(date +%T)" >>$log
cat $log
