#!/usr/bin/env bash
# Data-parallel scaling on the GPUs of one machine, Castor beside PyTorch DDP in one run. Run on
# the GPU machine from the repository root with gpu-carry/ from scripts/build_gpu.sh and a plan
# compiled with --data-parallel:
#
#   bench/data_parallel_gpu.sh PLAN GPUS [OUT_DIR]      # e.g. gpu-carry/plans/r50_fp16_b256_dp.plan 2
#
# Castor: `castor-run train --device cuda --data synthetic` on 1 GPU and on GPUS GPUs
# (--replicas), STEPS steps each; the job's img/s is the median of the leader's per-step figures
# after the first WARMUP steps (--log-json). PyTorch: bench/torch_ddp.py under torchrun on 1 and
# GPUS GPUs (MODEL, the model the plan was compiled from; per-GPU batch BATCH). Results in
# OUT_DIR: castor_1.jsonl, castor_N.jsonl, torch.jsonl, summary.txt (scaling efficiency:
# N-GPU img/s over N times the 1-GPU img/s, for each).
set -uo pipefail
plan=${1:?usage: data_parallel_gpu.sh PLAN GPUS [OUT_DIR]}
gpus=${2:?usage: data_parallel_gpu.sh PLAN GPUS [OUT_DIR]}
out="${3:-${OUT:-out}}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
steps="${STEPS:-60}"; warmup="${WARMUP:-20}"
py=/opt/torch/.venv/bin/python3; [ -x "$py" ] || py=python3
median_rate() { # the median img/s of a --log-json file after the warmup steps
  "$py" -c "import json,statistics,sys; v=[json.loads(l)['img_per_s'] for l in open(sys.argv[1]) if l.strip()][int(sys.argv[2]):]; print(statistics.median(v) if v else 0)" "$1" "$warmup"
}
for n in 1 "$gpus"; do
  rm -f "$out/castor_$n.jsonl"
  timeout "${CASTOR_LIMIT:-300}" "$bin/castor-run" train "$plan" --device cuda --replicas "$n" --steps "$steps" \
    --data synthetic --log-json "$out/castor_$n.jsonl" --replica-timeout 120 2>>"$out/castor_stderr.txt" | tail -1
  echo "castor $n GPU(s): $(median_rate "$out/castor_$n.jsonl") img/s" | tee -a "$out/summary.txt"
done
: >"$out/torch.jsonl"
for n in 1 "$gpus"; do
  timeout "${TORCH_LIMIT:-300}" "$py" -m torch.distributed.run --nproc-per-node "$n" bench/torch_ddp.py \
    --model "${MODEL:-resnet50}" --batch "${BATCH:-256}" 2>>"$out/torch_stderr.txt" | tee -a "$out/torch.jsonl"
done
"$py" - "$out" "$gpus" <<'PY' | tee -a "$out/summary.txt"
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
lines = [l for l in open(f"{out}/summary.txt") if l.startswith("castor")]
castor = {int(l.split()[1]): float(l.split()[3]) for l in lines}
torch = {d["gpus"]: d["img_per_s"] for d in (json.loads(l) for l in open(f"{out}/torch.jsonl") if l.strip())}
for name, r in (("castor", castor), ("pytorch ddp", torch)):
    if 1 in r and n in r and r[1] > 0:
        print(f"{name}: {r[n]:.0f} img/s on {n} GPUs, {r[n] / (n * r[1]):.3f} of {n}x its 1-GPU {r[1]:.0f}")
if n in castor and n in torch and torch[n] > 0:
    print(f"castor / pytorch ddp on {n} GPUs: {castor[n] / torch[n]:.3f}")
PY
