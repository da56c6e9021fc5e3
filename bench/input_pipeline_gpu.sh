#!/usr/bin/env bash
# The input-pipeline measurements on the GPU machine, from the repository root, with what
# scripts/build_gpu.sh put in gpu-carry/ (and bench/compile_recompute_plans.sh's ResNet-50 plan):
# the pixel kernels' tests; castor-run bench and castor-run train on synthetic data (made on the
# device) for ResNet-50 fp16 batch 256; a JPEG folder of ImageNet-sized images (500x375, quality
# 90, made there with scripts/make_image_folder.py) trained with decoding on the device (nvJPEG, --decoder gpu) and on the host (TurboJPEG, --decoder host);
# PyTorch's DataLoader on the same folder (torch_folder_train.py, 16 workers).
#
#   bench/input_pipeline_gpu.sh [OUT_DIR]     # OUT_DIR defaults to $OUT
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
P="$carry/plans" log="$out/pipeline.txt"
timeout 120 "$bin/castor_cuda_kernel_tests" pixels >"$out/pixel_tests.txt" 2>&1
echo "pixel kernel tests exit $?: $(tail -1 "$out/pixel_tests.txt")" >>"$log"
plan="$P/r50_fp16_b256.plan"
# Training runs: 80 steps, the median of steps 21-80 (the balanced share settles in the first 20).
steps=80 skip=20
timeout 200 "$bin/castor-run" bench "$plan" --device cuda --steps 30 --warmup 5 --json 2>>"$out/stderr.txt" |
  tail -1 >"$out/bench.json"
python3 -c "import json,sys; print('bench', json.load(open(sys.argv[1]))['img_per_s'], 'img/s')" "$out/bench.json" >>"$log"
timeout 120 "$bin/castor-run" train "$plan" --device cuda --steps "$steps" --data synthetic --log-json "$out/train_synthetic.jsonl" \
  2>>"$out/stderr.txt" | tail -1 >>"$log"
# 1000 classes (the plan's) x 8 ImageNet-sized JPEGs (made on all cores).
folder=/tmp/jpeg-folder
python3 scripts/make_image_folder.py --kind synthetic --out "$folder" --classes 1000 --per-class 8 --width 500 \
  --height 375 --quality 90 --seed 1 --jobs 16 >>"$log" 2>&1
# nvJPEG against TurboJPEG on 16 of these files, the device resize against the host's, and the
# device's decoding rate alone (the decode cases of the kernel tests).
CASTOR_DECODE_TEST_DIR="$(ls -d "$folder"/*/ | head -1)" CASTOR_DECODE_BENCH_DIR="$folder" timeout 90 \
  "$bin/castor_cuda_kernel_tests" decode >"$out/decode_tests.txt" 2>&1
echo "decode tests exit $?" >>"$log"
grep -E "^(PASS|FAIL|INFO)" "$out/decode_tests.txt" | grep -vE "^PASS decode nvjpeg .*/0000(0[2-9]|1[0-5])" >>"$log"
# Device decoding with a share of each batch decoded on the host at once (auto: balanced while
# training, the default), and host decoding alone.
for share in ${SHARES:-auto 0.7 0}; do
  timeout 120 "$bin/castor-run" train "$plan" --device cuda --steps "$steps" --data "folder:$folder" --decoder gpu \
    --host-decode-share "$share" --log-json "$out/train_folder_gpu_$share.jsonl" 2>>"$out/stderr.txt" | tail -1 |
    sed "s/^/decoder gpu, host share $share: /" >>"$log"
done
timeout 120 "$bin/castor-run" train "$plan" --device cuda --steps "$steps" --data "folder:$folder" --decoder host \
  --log-json "$out/train_folder_host.jsonl" 2>>"$out/stderr.txt" | tail -1 | sed "s/^/decoder host: /" >>"$log"
(cd "$carry" && timeout 200 python3 torch_folder_train.py "$folder" --batch 256 --steps 30 --warmup 5 --workers 16) \
  >"$out/torch_folder.json" 2>>"$out/stderr.txt"
python3 - "$out" "$skip" >>"$log" <<'PY'
import json, statistics, sys
out, skip = sys.argv[1], int(sys.argv[2])
bench = json.load(open(out + "/bench.json"))["img_per_s"]
import glob, os
for path in sorted(glob.glob(f"{out}/train_*.jsonl")):
    name = os.path.basename(path)[:-len(".jsonl")]
    rows = [json.loads(l) for l in open(path)][skip:]
    if not rows:
        continue
    ips = statistics.median(r["img_per_s"] for r in rows)
    wait = statistics.median(r["data_wait_ms"] for r in rows)
    share = ""
    if "host_decode_share" in rows[0]:
        shares = [r["host_decode_share"] for r in rows]
        share = f"; host share {min(shares):.2f}-{max(shares):.2f}, median launch wait " \
                f"{statistics.median(r['launch_wait_ms'] for r in rows):.1f} ms"
    print(f"{name:24s} median {ips:8.1f} img/s = {ips / bench:.3f} of bench; median data wait {wait:.1f} ms{share}")
try:
    t = json.load(open(out + "/torch_folder.json"))
    print(f"pytorch dataloader     {t['img_per_s']:8.1f} img/s = {t['img_per_s'] / bench:.3f} of Castor's bench; wait share {t['data_wait_share']}")
except Exception as e:
    print("pytorch dataloader failed:", e)
PY
cat "$log"
