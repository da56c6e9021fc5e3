#!/usr/bin/env bash
# ResNet-50 training speed and memory, Castor beside PyTorch in one run on one GPU: every figure
# of docs/performance.md comes from this script. Run on the GPU machine from the repository root
# with the runtime build and plans made by scripts/build_gpu.sh (gpu-carry/):
#
#   bench/resnet50_vs_torch.sh [CARRY_DIR] [OUT_DIR]
#
# Castor: `castor-run bench` on the batch-256 AdamW (weight decay 0.01) training plans in fp16
# (dynamic loss scaling), bf16 and fp32 (TF32 off), synthetic data resident on the GPU.
# PyTorch: torch_resnet50.py (the same model, optimizer, batch and data) in amp-fp16-cl,
# compile-fp16-cl, amp-bf16-cl and fp32. Results: castor.jsonl, torch.jsonl and summary.md in
# OUT_DIR, ratios computed by bench/summarize.py.
set -uo pipefail
carry="${1:-gpu-carry}"
out="${2:-${OUT:-out}}"
mkdir -p "$out"
steps="${CASTOR_BENCH_STEPS:-30}"
modes="${TORCH_MODES:-amp-fp16-cl,compile-fp16-cl,amp-bf16-cl,fp32}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
: >"$out/castor.jsonl"
for p in ${CASTOR_PRECISIONS:-fp16 bf16 fp32}; do
  plan="$carry/plans/r50_${p}_b256.plan"
  [ -f "$plan" ] || { echo "missing $plan" >&2; continue; }
  "$carry/bin/castor-run" bench "$plan" --device cuda --steps "$steps" --warmup 5 --json \
    | sed "s/^{/{\"precision\": \"$p\", /" | tee -a "$out/castor.jsonl"
done
python3 "$carry/torch_resnet50.py" --modes "$modes" --batch 256 ${TORCH_ARGS:-} | tee "$out/torch.jsonl"
python3 bench/summarize.py "$out/castor.jsonl" "$out/torch.jsonl" "$out/gpu.txt" | tee "$out/summary.md"
