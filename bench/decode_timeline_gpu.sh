#!/usr/bin/env bash
# Where the time of a step goes when its images are decoded on the device beside it: castor-run
# train with CASTOR_STEP_TIMELINE=1 (GPU spans of the step and of the decoding, host waits; medians
# on stderr) on synthetic data and on a JPEG folder (500x375, quality 90) with several host shares,
# for ResNet-50 fp16 batch 256, from what scripts/build_gpu.sh put in gpu-carry/.
#
#   bench/decode_timeline_gpu.sh [OUT_DIR] [SHARES...]    # OUT_DIR defaults to $OUT
set -u
out="${1:-$OUT}"
shift || true
shares="${*:-0 0.7 1}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
plan="$carry/plans/r50_fp16_b256.plan" log="$out/timeline.txt"
folder=/tmp/jpeg-folder
[ -d "$folder" ] || python3 scripts/make_image_folder.py --kind synthetic --out "$folder" --classes 1000 \
  --per-class 8 --width 500 --height 375 --quality 90 --seed 1 --jobs 16 >/dev/null 2>&1
run() { # NAME ARGS...
  local name="$1"
  shift
  CASTOR_STEP_TIMELINE=1 timeout 120 "$bin/castor-run" train "$plan" --device cuda --steps 40 "$@" \
    --log-json "$out/$name.jsonl" >"$out/$name.stdout" 2>"$out/$name.stderr"
  echo "== $name (exit $?): $*" >>"$log"
  grep -h "timeline of" "$out/$name.stderr" >>"$log"
  python3 - "$out/$name.jsonl" >>"$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][5:]
print("img/s median %.1f, data wait median %.1f ms" % (statistics.median(r["img_per_s"] for r in rows),
      statistics.median(r["data_wait_ms"] for r in rows)))
PY
}
run synthetic --data synthetic
for share in $shares; do
  run "gpu_$share" --data "folder:$folder" --decoder gpu --host-decode-share "$share"
done
cat "$log"
