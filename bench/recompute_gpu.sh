#!/usr/bin/env bash
# The recompute measurements on the GPU machine, from the repository root, with what
# scripts/build_gpu.sh and bench/compile_recompute_plans.sh put in gpu-carry/. Two parts, one
# device call each (about 8 minutes apiece):
#   1: the GPU tests (batch-norm kernels with batch_norm_apply, the CPU/CUDA agreement of every
#      tiny plan, the recompute ones included); ResNet-50 fp16 batch 256 without recompute, with
#      cheap and with auto under 6.5 and 6 GiB, beside PyTorch amp-fp16-cl and ckpt-fp16-cl.
#   2: predicted against measured peak on ResNeXt-50 and DenseNet-121 (batch 128, with and
#      without recompute); the largest ResNet-50 batch within 24 GiB, Castor's plans with and
#      without recompute run, PyTorch's found under a 24 GiB cap (torch_max_batch.py).
#
#   bench/recompute_gpu.sh PART [OUT_DIR]     # OUT_DIR defaults to $OUT
# Results: OUT_DIR/tests.txt, castor.jsonl (castor-run bench --json, one line per plan, with the
# compiler's predicted peak and the allocations by purpose), torch.jsonl, summary.txt.
set -u
part="$1"
out="${2:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
P="$carry/plans" log="$out/tests.txt"
bench() { # PLAN [STEPS]: one castor-run bench line in castor.jsonl
  timeout 150 "$bin/castor-run" bench "$P/$1.plan" --device cuda --steps "${2:-20}" --warmup 5 --json \
    2>>"$out/bench_stderr.txt" | tail -1 >>"$out/castor.jsonl" || echo "$1: bench failed" >>"$log"
}
if [ "$part" = 1 ]; then
  timeout 150 "$bin/castor_cuda_kernel_tests" batch_norm >/tmp/kernels.txt 2>&1
  echo "batch-norm kernel tests exit $?: $(tail -1 /tmp/kernels.txt)" >>"$log"
  grep "^FAIL" /tmp/kernels.txt | head -20 >>"$log"
  grep -c "^PASS.*batch_norm_apply" /tmp/kernels.txt | sed 's/^/batch_norm_apply cases passing: /' >>"$log"
  timeout 200 "$bin/castor_cuda_tests" "$P" --steps 3 >/tmp/agreement.txt 2>&1
  echo "agreement exit $?: $(tail -1 /tmp/agreement.txt)" >>"$log"
  grep -iE "recompute|cheap|auto|FAIL" /tmp/agreement.txt | head -20 >>"$log"
  for plan in r50_fp16_b256 r50_fp16_b256_cheap r50_fp16_b256_auto6.5 r50_fp16_b256_auto6 r50_fp16_b256; do
    bench "$plan"
  done
  timeout 150 python3 "$carry/torch_resnet50.py" --modes amp-fp16-cl,ckpt-fp16-cl --batch 256 >>"$out/torch.jsonl"
else
  for plan in resnext50_32x4d_fp16_b128_none resnext50_32x4d_fp16_b128_cheap densenet121_fp16_b128_none \
    densenet121_fp16_b128_cheap; do
    bench "$plan"
  done
  for plan in "$P"/r50_fp16_b*_max_*.plan; do
    bench "$(basename "$plan" .plan)" 5
  done
  (cd "$carry" && timeout 240 python3 torch_max_batch.py --modes amp-fp16-cl,ckpt-fp16-cl --cap-gib 24) \
    >>"$out/torch.jsonl"
fi
python3 - "$out" >"$out/summary.txt" <<'PY'
import json, sys
out = sys.argv[1]
for line in open(out + "/castor.jsonl"):
    r = json.loads(line)
    pred = r.get("predicted_peak_bytes") or 0
    print(f"{r['plan'].split('/')[-1]:40s} {r['img_per_s']:9.1f} img/s  peak {r['peak_gib']:.3f} GiB  predicted "
          f"{pred / 2**30:.3f} GiB  measured/predicted {r['peak_bytes'] / pred if pred else 0:.3f}  "
          f"allocated {r.get('allocated_bytes')}")
try:
    for line in open(out + "/torch.jsonl"):
        print(line.strip())
except FileNotFoundError:
    pass
PY
cat "$log" "$out/summary.txt"
