#!/usr/bin/env bash
# Device call: the fused kernels' composed scratch through ctx.workspaceTensors; the bench report.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin; P=$carry/plans
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:$PWD/$carry/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt; : >$log
timeout 150 $bin/castor_cuda_kernel_tests >$out/kernels.txt 2>&1; echo "kernel tests exit $?: $(tail -1 $out/kernels.txt)" >>$log
timeout 200 $bin/castor_cuda_tests $P --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?: $(tail -1 $out/agreement.txt)" >>$log
CASTOR_FUSED_BN=composed timeout 120 $bin/castor_cuda_tests $P/tiny_fp16_adamw.plan --steps 3 >$out/agreement_composed.txt 2>&1; echo "agreement (composed) exit $?: $(tail -1 $out/agreement_composed.txt)" >>$log
for plan in r50_fp16_b256 r50_fp16_b256_nofuse r50_fp16_b256 r50_fp16_b256_nofuse; do
  timeout 90 $bin/castor-run bench $P/$plan.plan --device cuda --steps 20 --warmup 5 --json 2>/dev/null | tail -1 >>$out/castor.jsonl
done
python3 - $out >>$log <<'PY'
import json, sys
for l in open(sys.argv[1] + '/castor.jsonl'):
    r = json.loads(l); print(r['plan'].split('/')[-1], r['img_per_s'], r['peak_gib'], r['fusion']['ways'], len(r['tuning']))
PY
cat $log
