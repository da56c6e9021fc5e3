#!/usr/bin/env bash
# Plans for the recompute measurements (bench/recompute_gpu.sh), compiled here into
# gpu-carry/plans: ResNet-50 fp16 at batch 256 without recompute, with `cheap` and with `auto`
# under budgets; two other CNNs with and without recompute (predicted against measured peak);
# and the largest ResNet-50 fp16 batch whose planned peak fits 24 GiB (the RTX 4090's memory)
# without recompute and with `auto --memory-budget 24GiB`, by bisection on the batch (multiples
# of 8). AdamW lr 1e-3, weight decay 0.01, as torch_resnet50.py trains.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
castor="$root/build/bin/castor"
out="$root/gpu-carry/plans"
mkdir -p "$out"
common=(--init kaiming --train --precision fp16 --optimizer adamw --lr 1e-3 --weight-decay 0.01)
r50="$root/models/resnet50.onnx"

"$castor" compile "$r50" "${common[@]}" --batch 256 -o "$out/r50_fp16_b256.plan" 2>/dev/null
"$castor" compile "$r50" "${common[@]}" --batch 256 --recompute cheap -o "$out/r50_fp16_b256_cheap.plan" 2>/dev/null
for budget in 6.5GiB 6GiB; do
  "$castor" compile "$r50" "${common[@]}" --batch 256 --recompute auto --memory-budget "$budget" \
    -o "$out/r50_fp16_b256_auto${budget%GiB}.plan" 2>/dev/null
done
for m in resnext50_32x4d densenet121; do
  for policy in none cheap; do
    "$castor" compile "$root/test/fixtures/torchvision/${m}_train.onnx" "${common[@]}" --batch 128 \
      --recompute "$policy" -o "$out/${m}_fp16_b128_${policy}.plan" 2>/dev/null
  done
done

# fits BATCH POLICY: whether the planned peak fits 24 GiB.
fits() {
  local plan="$out/r50_fp16_max_$2.plan"
  if [ "$2" = auto ]; then
    "$castor" compile "$r50" "${common[@]}" --batch "$1" --recompute auto --memory-budget 24GiB -o "$plan" \
      >/dev/null 2>&1
  else
    "$castor" compile "$r50" "${common[@]}" --batch "$1" --report "$out/max_report" -o "$plan" >/dev/null 2>&1 &&
      python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))['predicted_peak_bytes'] > 24 << 30)" \
        "$out/max_report/memory.json"
  fi
}
for policy in none auto; do
  lo=256 hi=4096 # fits(lo), not fits(hi)
  while [ $((hi - lo)) -gt 8 ]; do
    mid=$(((lo + hi) / 16 * 8))
    if fits "$mid" "$policy"; then lo=$mid; else hi=$mid; fi
  done
  fits "$lo" "$policy"
  mv "$out/r50_fp16_max_$policy.plan" "$out/r50_fp16_b${lo}_max_$policy.plan"
  echo "largest ResNet-50 fp16 batch within 24 GiB planned, recompute $policy: $lo"
done
rm -rf "$out/max_report"
ls "$out" | grep -E "r50_fp16|resnext|densenet"
