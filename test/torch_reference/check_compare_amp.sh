#!/usr/bin/env bash
# The AMP comparison's own checks without torch or a GPU (compare_amp.py selftest): the weights
# and data files it writes reach castor-run as intended, and the criterion logic, on a small
# plan compiled with lr 0 in fp16 (loss scaling) and in bf16 (none).
#   check_compare_amp.sh BUILD_BIN WORK
set -euo pipefail
bin=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
python3 "$here/../../models/resnet.py" --arch tiny --weights none -o "$work/tiny.onnx" >/dev/null
for p in fp16 bf16; do
  "$bin/castor" compile "$work/tiny.onnx" --init kaiming --batch 2 --train --precision "$p" --optimizer adamw --lr 0 \
    --weight-decay 0.01 -o "$work/tiny_lr0_$p.plan" >/dev/null 2>&1
  python3 "$here/compare_amp.py" selftest --plan "$work/tiny_lr0_$p.plan" --castor-run "$bin/castor-run" \
    --work "$work/$p"
done
