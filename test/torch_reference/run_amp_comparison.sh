#!/usr/bin/env bash
# Mixed-precision training of a torchvision model against PyTorch AMP (compare_amp.py); by default
# ResNet-50 fp16, 100 steps (MODEL, PLAN and EXTRA below take another model, precision or length).
#
# Part A, where castor (the compiler) is built — compile the plan into the carried folder
# (hyperparameters are read back from the plan by the comparison, so PyTorch uses the same):
#
#   build/bin/castor compile models/resnet50.onnx --init kaiming --batch 64 --train \
#     --precision fp16 --optimizer adamw --lr 1e-4 --beta1 0.9 --beta2 0.999 --eps 1e-8 \
#     --weight-decay 0.01 --loss-scale dynamic -o gpu-carry/plans/r50_fp16_b64_cmp.plan
#
#   The same with --loss-scale-init 8192 -o gpu-carry/plans/r50_fp16_b64_cmp_ls8192.plan gives a
#   plan whose run skips no step (see compare_amp.py on the loss scaler); run it with
#   PLAN=gpu-carry/plans/r50_fp16_b64_cmp_ls8192.plan.
#
#   The carried folder also needs bin/castor-run (scripts/build_gpu.sh) and lib/ with the two
#   libraries castor-run links that the GPU machine lacks:
#   mkdir -p gpu-carry/lib && cp -L /lib/x86_64-linux-gnu/{libfmt.so.9,libprotobuf.so.32} gpu-carry/lib/
#
# Part B, on the GPU machine, from the repository root (torch + torchvision + a GPU):
#
#   test/torch_reference/run_amp_comparison.sh gpu-carry OUT_DIR
#
# (through the device tool: command "test/torch_reference/run_amp_comparison.sh gpu-carry $OUT/amp",
# carry ["gpu-carry"]; about 90 s on an H200, Castor's 100 steps about 40 s of it).
#
# It writes OUT_DIR/amp_resnet50.json (the result), OUT_DIR/amp_resnet50.txt (the per-step table)
# and OUT_DIR/amp_resnet50.log (everything printed); scratch data (~0.6 GB) goes to
# ${WORK:-/tmp/castor_amp_r50}. Exit status: 0 criterion met, 1 not met, 2 setup error.
# Environment: PYTHON (default /opt/torch/.venv/bin/python3, else python3), PLAN (default
# CARRY/plans/r50_fp16_b64_cmp.plan), MODEL (the torchvision model the plan was compiled from,
# default resnet50; the files are then named amp_MODEL.* unless NAME says otherwise), EXTRA (more
# options for the script, e.g. --no-floor, --steps 50).
set -euo pipefail
carry=${1:?usage: run_amp_comparison.sh CARRY_DIR OUT_DIR}
out=${2:?usage: run_amp_comparison.sh CARRY_DIR OUT_DIR}
carry=$(cd "$carry" && pwd)
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$py" ] || py=python3
plan=${PLAN:-$carry/plans/r50_fp16_b64_cmp.plan}
run="$carry/bin/castor-run"
model=${MODEL:-resnet50}
name=${NAME:-amp_$model}

# castor-run's libraries: libfmt/libprotobuf from the carried lib/, cuDNN and cuBLAS from the
# NVIDIA wheels beside PyTorch (then the CUDA toolkit's own).
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
wheels=$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
export LD_LIBRARY_PATH="$carry/lib${wheels:+:$wheels}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ldd "$run" | grep -q "not found"; then
  ldd "$run" | grep "not found" >&2
  echo "castor-run is missing libraries (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)" >&2
  exit 2
fi
ldd "$run" | grep -E "cudnn|cublas|cudart|fmt|protobuf" | tee "$out/$name.log"

set +e
"$py" "$here/compare_amp.py" run --plan "$plan" --model "$model" --castor-run "$run" --device cuda \
  --work "${WORK:-/tmp/castor_amp_$model}" --out "$out/$name.json" ${EXTRA:-} 2>&1 \
  | tee -a "$out/$name.log"
exit "${PIPESTATUS[0]}"
