#!/usr/bin/env bash
# Device call (H200): ViT-B/16 with fused attention and views against PyTorch AMP over 50 steps
# from identical weights and data (fp16, bf16), then ViT-B/16 fp16 beside torch.compile and
# without Castor's graph fusions (--fuse none). Everything goes to /tmp/r; the files kept are
# copied to $OUT.
set -u
r=/tmp/r; mkdir -p $r
source bench/gpu_env.sh
for p in fp16 bf16; do
  PLAN=$carry/plans/vit_b_16_${p}_b128_cmp.plan MODEL=vit_b_16 NAME=amp_vit_b_16_$p EXTRA="--steps 50 --no-floor" \
    timeout 150 test/torch_reference/run_amp_comparison.sh $carry $r >$r/cmp_$p.txt 2>&1
  echo "comparison $p exit $?"; tail -4 $r/cmp_$p.txt
done
CASTOR_PRECISIONS=fp16 TORCH_MODES=compile-fp16-cl TORCH_LIMIT=200 bench/torchvision_vs_torch.sh vit_b_16 128 $r/vitc 2>&1 \
  | grep -v "^{" | grep -E "^\|"
timeout 60 $bin/castor-run bench $carry/plans/vit_b_16_fp16_b128_nofuse.plan --device cuda --steps 20 --warmup 5 --json \
  2>$r/nofuse_stderr.txt | tail -1 >$r/vit_nofuse.jsonl; grep -o '"img_per_s": [0-9.]*' $r/vit_nofuse.jsonl
cp $r/amp_vit_b_16_fp16.json $r/amp_vit_b_16_fp16.txt $r/amp_vit_b_16_bf16.json $r/amp_vit_b_16_bf16.txt "$OUT"/ 2>/dev/null
cat $r/vitc/castor.jsonl $r/vitc/torch.jsonl $r/vit_nofuse.jsonl >"$OUT/vit_compile_runs.jsonl" 2>/dev/null
