#!/usr/bin/env bash
# Device call: four more torchvision CNNs (depthwise, concat, ReLU6/clip, average pooling) on the
# castor-run of main before the restructure (A, 37d73f7) and after it (B), in the same call.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt; : >$log
for m in mobilenet_v2 densenet121 vgg11_bn squeezenet1_0; do
  timeout 90 $bin/castor-run bench $carry/plans/${m}_fp16_b128.plan --device cuda --steps 3 --warmup 1 >/dev/null 2>>$log || echo "warm-up $m failed" >>$log
done
echo "== A/B $(date +%T)" >>$log
ROUNDS=2 STEPS=20 timeout 300 bench/ab_castor_run.sh $bin/castor-run-old $bin/castor-run $out/ab.jsonl \
  $carry/plans/mobilenet_v2_fp16_b128.plan $carry/plans/densenet121_fp16_b128.plan \
  $carry/plans/vgg11_bn_fp16_b128.plan $carry/plans/squeezenet1_0_fp16_b128.plan 2>&1 | grep -v '^{' >>$log
python3 - $out/ab.jsonl >>$log <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
for plan in sorted({r['plan'] for r in rows}):
    losses = {(r['build'], r['loss_first'], r['loss_last']) for r in rows if r['plan'] == plan}
    print(plan, 'losses (build, first, last):', sorted(losses))
PY
echo "== end $(date +%T)" >>$log
cat $log
