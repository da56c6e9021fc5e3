#!/usr/bin/env bash
# Device call: fused vs composed chosen by the tuner (forward + backward timed together).
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin; P=$carry/plans
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:$PWD/$carry/lib:${LD_LIBRARY_PATH:-}"
log=$out/tests.txt; : >$log
export CASTOR_TUNING_CACHE=/tmp/castor-tuning-cold; rm -rf $CASTOR_TUNING_CACHE; mkdir -p $CASTOR_TUNING_CACHE
for run in cold warm; do
  s=$(date +%s%N); timeout 100 $bin/castor-run bench $P/r50_fp16_b256.plan --device cuda --steps 1 --warmup 0 --json >$out/$run.json 2>&1
  e=$(date +%s%N); echo "r50 fp16 fused: $run bench (load + tune + 1 step) wall $(( (e - s) / 1000000 )) ms" >>$log
done
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
timeout 150 $bin/castor_cuda_kernel_tests >$out/kernels.txt 2>&1; echo "kernel tests exit $?: $(tail -1 $out/kernels.txt)" >>$log
timeout 200 $bin/castor_cuda_tests $P --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?: $(tail -1 $out/agreement.txt)" >>$log
for plan in r50_fp16_b256 r50_fp16_b256_nofuse r50_fp16_b256 r50_fp16_b256_nofuse; do
  timeout 90 $bin/castor-run bench $P/$plan.plan --device cuda --steps 20 --warmup 5 --json 2>/dev/null | tail -1 >>$out/castor.jsonl
done
CASTOR_FUSED_BN=fused timeout 90 $bin/castor-run bench $P/r50_fp16_b256.plan --device cuda --steps 20 --warmup 5 --json 2>/dev/null | tail -1 | sed 's|^{|{"forced": "fused", |' >>$out/castor.jsonl
python3 - $out >>$log <<'PY'
import json, sys
for l in open(sys.argv[1] + '/castor.jsonl'):
    r = json.loads(l)
    print(r.get('forced', ''), r['plan'].split('/')[-1], r['img_per_s'], r['peak_gib'], r['fusion']['ways'], len(r['tuning']), r['kernel_ms'])
PY
grep "^batch_norm_relu" $CASTOR_TUNING_CACHE/*.txt | cut -f1,2 | head -40 >>$out/pair_choices.txt
cut -f2 $out/pair_choices.txt | sort | uniq -c >>$log
cat $log
