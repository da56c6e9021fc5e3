#!/usr/bin/env bash
# Device call: the own fused batch-norm-ReLU kernels, 16-byte packs, block-per-channel merges.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin; P=$carry/plans
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:$PWD/$carry/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt; : >$log
timeout 60 $bin/castor_cuda_kernel_tests batch_norm_relu >$out/kernels_bnrelu.txt 2>&1; echo "fused kernel tests exit $?: $(tail -1 $out/kernels_bnrelu.txt)" >>$log
grep "^FAIL" $out/kernels_bnrelu.txt | head -20 >>$log
timeout 150 $bin/castor_cuda_tests $P --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?: $(tail -1 $out/agreement.txt)" >>$log
b() { timeout 90 env $3 $bin/castor-run bench $P/$1.plan --device cuda --steps 20 --warmup 5 --json 2>>$out/bench_stderr.txt | tail -1 | sed "s|^{|{\"run\": \"$2 $3\", |" >>$out/castor.jsonl; }
b r50_bf16_b256 own CASTOR_FUSED_BN=own; b r50_bf16_b256 tuned X=1; b r50_bf16_b256_nofuse 1 X=1; b r50_bf16_b256 tuned X=1; b r50_bf16_b256_nofuse 2 X=1
b r50_fp16_b256 own CASTOR_FUSED_BN=own; b r50_fp16_b256 tuned X=1; b r50_fp16_b256_nofuse 1 X=1
python3 - $out >>$log <<'PY'
import json, sys
for l in open(sys.argv[1] + '/castor.jsonl'):
    r = json.loads(l)
    print(r['run'], r['plan'].split('/')[-1], r['img_per_s'], r['peak_gib'], r['fusion']['ways'], r['kernel_ms'], r['op_ms'].get('batch_norm_relu_training'), r['op_ms'].get('batch_norm_relu_training_backward'))
PY
grep "^batch_norm_relu" $CASTOR_TUNING_CACHE/*.txt >$out/pair_choices.txt
cut -f2 $out/pair_choices.txt | sort | uniq -c >>$log
cat $log
