#!/usr/bin/env bash
# Device call (H200): the own batch-norm-ReLU kernels after the rework (reductions over at most
# 32 packs of a row a block with 4 rows in flight, a coalesced merge, the backward's element-wise
# pass tiled by rows): the CUDA kernel tests and the plans' CPU/CUDA agreement, the kernels'
# bandwidth beside the previous ones (castor-bn-bench-d79c2b0) and ResNet-50 fp16 batch 256.
set -u
source bench/gpu_env.sh
timeout 200 $bin/castor_cuda_kernel_tests >/tmp/kernels.txt 2>&1; echo "kernel tests exit $?"
grep -E "FAIL|PASS" /tmp/kernels.txt | tail -4
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >/tmp/agree.txt 2>&1; echo "agreement exit $?"
grep -E "FAIL|PASS:" /tmp/agree.txt | tail -6
cp /tmp/kernels.txt /tmp/agree.txt "$OUT/"
for b in castor-bn-bench-d79c2b0 castor-bn-bench; do
  $bin/$b --batch 256 --dtype f16 --iters 20 >"$OUT/$b.jsonl"
done
python3 - "$OUT/castor-bn-bench-d79c2b0.jsonl" "$OUT/castor-bn-bench.jsonl" <<'PY'
import json, sys
old = [json.loads(l) for l in open(sys.argv[1])]
new = [json.loads(l) for l in open(sys.argv[2])]
for o, n in zip(old, new):
    if o['fn'] != 'copy':
        print(o['shape'].ljust(18), o['fn'][:8].ljust(9), '%.3f -> %.3f ms' % (o['ms'], n['ms']), '%5d -> %5d GB/s' % (o['GBps'], n['GBps']))
PY
summ() { python3 -c "
import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print('img/s', d['img_per_s'], 'median ms', d['median_ms'], 'kernel ms', d['kernel_total_ms'], 'peak GiB', d['peak_gib'])
print('ops', {k: v for k, v in d['op_ms'].items() if v > 0.3})
" "$1"; }
for p in r50_fp16_b256 r50_bf16_b256; do
  timeout 120 $bin/castor-run bench $carry/plans/$p.plan --device cuda --steps 30 --warmup 5 --json \
    >/tmp/$p.json 2>/tmp/$p.err; echo "== $p rc $?"; grep -E "error" /tmp/$p.err | head -3
  summ /tmp/$p.json; cp /tmp/$p.json "$OUT/"
done
