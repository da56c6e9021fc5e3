#!/usr/bin/env bash
# Any torchvision classifier's training speed and memory, Castor beside PyTorch in one run on one
# GPU (the same idea as resnet50_vs_torch.sh). Run on the GPU machine from the repository root:
#
#   bench/torchvision_vs_torch.sh MODEL BATCH [OUT_DIR]
#
# Castor: `castor-run bench` on gpu-carry/plans/MODEL_{fp16,bf16}_bBATCH.plan, compiled from the
# model's training-mode export (models/export_torchvision.py) with --init kaiming --train
# --optimizer adamw --lr 1e-3 --weight-decay 0.01 at that batch (synthetic data resident on the
# GPU). PyTorch: bench/torch_torchvision.py on the same model, optimizer and batch in
# amp-fp16-cl, compile-fp16-cl, amp-bf16-cl and compile-bf16-cl (TORCH_MODES). Results:
# castor.jsonl, torch.jsonl and summary.md in OUT_DIR (ratios by bench/summarize.py).
set -uo pipefail
model=${1:?usage: torchvision_vs_torch.sh MODEL BATCH [OUT_DIR]}
batch=${2:?usage: torchvision_vs_torch.sh MODEL BATCH [OUT_DIR]}
out="${3:-${OUT:-out}}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
steps="${CASTOR_BENCH_STEPS:-20}"
modes="${TORCH_MODES:-amp-fp16-cl,compile-fp16-cl,amp-bf16-cl,compile-bf16-cl}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/gpu.txt"
: >"$out/castor.jsonl"
for p in ${CASTOR_PRECISIONS:-fp16 bf16}; do
  plan="$carry/plans/${model}_${p}_b${batch}.plan"
  [ -f "$plan" ] || { echo "missing $plan" >&2; continue; }
  timeout "${CASTOR_LIMIT:-180}" "$bin/castor-run" bench "$plan" --device cuda --steps "$steps" --warmup 5 --json \
    2>>"$out/castor_stderr.txt" | tail -1 | sed "s/^{/{\"precision\": \"$p\", \"model\": \"$model\", /" \
    | tee -a "$out/castor.jsonl"
done
timeout "${TORCH_LIMIT:-300}" python3 bench/torch_torchvision.py --model "$model" --modes "$modes" --batch "$batch" \
  2>>"$out/torch_stderr.txt" | tee "$out/torch.jsonl"
python3 bench/summarize.py "$out/castor.jsonl" "$out/torch.jsonl" "$out/gpu.txt" | tee "$out/summary.md"
