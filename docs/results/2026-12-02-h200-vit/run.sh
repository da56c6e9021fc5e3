#!/usr/bin/env bash
# Device call (H200): ViT-B/16 training beside PyTorch. 1) the 50-step loss comparison with
# PyTorch AMP from identical weights and data, fp16 (dynamic loss scaling) then bf16, batch 128,
# AdamW lr 1e-4 (test/torch_reference/run_amp_comparison.sh); 2) img/s and peak memory of the
# batch-128 AdamW step beside PyTorch eager AMP and torch.compile (bench/torchvision_vs_torch.sh).
# Plans: castor compile test/fixtures/torchvision/vit_b_16_train.onnx --init kaiming --batch 128
# --train --precision P --optimizer adamw --weight-decay 0.01 --lr 1e-4 (comparison) or 1e-3
# (speed), into gpu-carry/plans.
set -u
out="$OUT"
source bench/gpu_env.sh
for p in fp16 bf16; do
  PLAN=$carry/plans/vit_b_16_${p}_b128_cmp.plan MODEL=vit_b_16 NAME=amp_vit_b_16_$p EXTRA="--steps 50" \
    timeout ${CMP_LIMIT:-200} test/torch_reference/run_amp_comparison.sh $carry "$out" >"$out/cmp_$p.txt" 2>&1
  echo "comparison $p exit $?" | tee -a "$out/cmp_$p.txt"
  tail -8 "$out/cmp_$p.txt"
  [ "$p" = fp16 ] && TORCH_MODES=${TORCH_MODES:-amp-fp16-cl,compile-fp16-cl,amp-bf16-cl} \
    bench/torchvision_vs_torch.sh vit_b_16 128 "$out/bench" 2>&1 | tail -30
done
