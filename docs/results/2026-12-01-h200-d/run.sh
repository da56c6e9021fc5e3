#!/usr/bin/env bash
# Device call: the GPU tests on the binaries of 056c8ea, and a bench beside PyTorch eager AMP.
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt; : >$log
timeout 120 $bin/castor_cuda_kernel_tests >/tmp/k.txt 2>&1; echo "kernel tests exit $?: $(tail -1 /tmp/k.txt)" >>$log
timeout 60 $bin/castor_conv_tests 2>&1 | tail -1 >>$log
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?: $(tail -1 $out/agreement.txt)" >>$log
grep -o 'allowed [0-9.]* ([^)]*)' $out/agreement.txt | sort -k2 -g | tail -1 >>$log
timeout 90 $bin/castor-run bench $carry/plans/r50_fp16_b256.plan --device cuda --steps 20 --warmup 5 --json 2>/dev/null | tail -1 >$out/castor.jsonl
timeout 90 python3 $carry/torch_resnet50.py --modes amp-fp16-cl --batch 256 >$out/torch.jsonl 2>/dev/null
python3 -c "import json;c=json.loads(open('$out/castor.jsonl').read());t=json.loads(open('$out/torch.jsonl').read().strip().splitlines()[-1]);print('castor fp16', c['img_per_s'], c['peak_gib'], 'torch amp-fp16-cl', t['img_per_s'], t['peak_gib'], 'ratio %.3f memory %.3f' % (c['img_per_s']/t['img_per_s'], c['peak_gib']/t['peak_gib']))" >>$log
cat $log
