#!/usr/bin/env bash
# Device call: CPU/CUDA agreement on fused plans, ResNet-50 AMP comparison with fusion, three more
# CNNs fused vs unfused beside PyTorch, cold start.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin; P=$carry/plans
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:$PWD/$carry/lib:${LD_LIBRARY_PATH:-}"
log=$out/tests.txt; : >$log
# Cold start on an empty tuning cache, then warm.
export CASTOR_TUNING_CACHE=/tmp/castor-tuning-cold; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
for run in cold warm; do
  s=$(date +%s%N); timeout 100 $bin/castor-run bench $P/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json >$out/$run.json 2>&1
  e=$(date +%s%N); echo "r50 fp16 fused: $run bench (load + tune + 1 step) wall $(( (e - s) / 1000000 )) ms" >>$log
done
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
timeout 240 $bin/castor_cuda_tests $P --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?: $(tail -1 $out/agreement.txt)" >>$log
grep -o 'allowed [0-9.]* ([^)]*)' $out/agreement.txt | sort -k2 -g | tail -1 >>$log
timeout 150 $carry/test/torch_reference/run_amp_comparison.sh $carry $out/amp >$out/amp_run.txt 2>&1; echo "amp comparison exit $?: $(tail -3 $out/amp_run.txt | tr '\n' ' ')" >>$log
cat $log
