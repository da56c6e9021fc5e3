#!/usr/bin/env bash
# The GPU agreement criterion can fail, checked without a GPU: castor_cuda_tests compares the CPU
# reference with itself (--device cpu: it must pass) and with plans that carry a real bug
# (--plant lr, --plant bn-bias: every comparison must fail).
#
#   check_agreement_criterion.sh CASTOR CASTOR_CUDA_TESTS REPO_ROOT
set -euo pipefail
castor="$1" tests="$2" root="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 "$root/models/resnet.py" --arch tiny --weights none --image-size 32 --num-classes 10 -o "$work/tiny.onnx" >/dev/null
for p in fp32 fp16 bf16; do
  "$castor" compile "$work/tiny.onnx" --init kaiming --batch 8 --train --precision "$p" --optimizer adamw --lr 1e-4 \
    -o "$work/tiny_${p}_adamw.plan" >/dev/null 2>&1
done
"$castor" compile "$work/tiny.onnx" --init kaiming --batch 8 --train --precision fp16 --optimizer sgd --momentum 0.9 \
  --emit-gradients -o "$work/tiny_fp16_sgd.plan" >/dev/null 2>&1

"$tests" "$work" --device cpu --steps 2 | tee "$work/clean.txt"
grep -q "^PASS: 4 plan" "$work/clean.txt"
for fault in lr bn-bias; do
  if "$tests" "$work" --device cpu --steps 2 --plant "$fault" >"$work/$fault.txt"; then
    cat "$work/$fault.txt"; echo "planted fault '$fault' passed the criterion"; exit 1
  fi
  cat "$work/$fault.txt"
  # Every comparison (4 plans, steps 1 and 2) fails, not just some.
  [ "$(grep -c ' FAIL$' "$work/$fault.txt")" -eq 8 ] || { echo "planted fault '$fault' passed some comparisons"; exit 1; }
done
echo "the criterion passes the reference and fails both planted faults"
