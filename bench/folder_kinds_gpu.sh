#!/usr/bin/env bash
# ResNet-50 fp16 batch 256 trained from image folders of several kinds, each against castor-run
# bench in the same call, with PyTorch's DataLoader on the same folders (docs/performance.md,
# "From image folders"). Run on the GPU machine from the repository root with gpu-carry/ holding
# bin/, plans/r50_fp16_b256.plan and torch_folder_train.py.
#
#   bench/folder_kinds_gpu.sh [OUT_DIR]   # KINDS (default "synthetic mixed large": scripts/make_image_folder.py
#                                         # --kind), PER_CLASS (default 8, x 1000 classes), STEPS (default 80),
#                                         # SHARES (default "auto": castor-run's --host-decode-share values, one
#                                         # run each; 0 and 1 measure the device's and the host's decoding alone),
#                                         # DECODES (default "exact": castor-run's --decode values, one run
#                                         # each), TORCH (default 1; 0 leaves PyTorch's DataLoader out),
#                                         # PIPELINE_PLAN (a plan of a model that costs next to nothing at
#                                         # the same input shape: trained from each folder too, it measures
#                                         # what the input pipeline delivers on this machine)
# OUT_DIR/folders.jsonl: one line a run (kind, share, who, img/s, its ratio to bench, median data wait).
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
plan="$carry/plans/r50_fp16_b256.plan" steps=${STEPS:-80} skip=20
timeout 200 "$bin/castor-run" bench "$plan" --device cuda --steps 30 --warmup 5 --json 2>>"$out/stderr.txt" |
  tail -1 >"$out/bench.json"
[ -n "${PIPELINE_PLAN:-}" ] && timeout 200 "$bin/castor-run" bench "$PIPELINE_PLAN" --device cuda --steps 30 --warmup 5 \
  --json 2>>"$out/stderr.txt" | tail -1 >"$out/pipeline_bench.json"
for kind in ${KINDS:-synthetic mixed large}; do
  folder=/tmp/folder-$kind
  [ -d "$folder" ] || python3 scripts/make_image_folder.py --kind "$kind" --out "$folder" --classes 1000 \
    --per-class "${PER_CLASS:-8}" --quality 90 --seed 1 --jobs "$(nproc)" >>"$out/stderr.txt" 2>&1
  du -sh "$folder" | sed "s/^/$kind: /" >>"$out/stderr.txt"
  for share in ${SHARES:-auto}; do
    for decode in ${DECODES:-exact}; do
      timeout 200 "$bin/castor-run" train "$plan" --device cuda --steps "$steps" --data "folder:$folder" \
        --host-decode-share "$share" --decode "$decode" \
        --log-json "$out/castor_${kind}_${share}_$decode.jsonl" >>"$out/stderr.txt" 2>&1
      [ -n "${PIPELINE_PLAN:-}" ] && timeout 200 "$bin/castor-run" train "$PIPELINE_PLAN" --device cuda --steps "$steps" \
        --data "folder:$folder" --host-decode-share "$share" --decode "$decode" \
        --log-json "$out/pipeline_${kind}_${share}_$decode.jsonl" >>"$out/stderr.txt" 2>&1
    done
  done
  [ "${TORCH:-1}" = 0 ] && continue
  (cd "$carry" && timeout 300 python3 torch_folder_train.py "$folder" --batch 256 --steps 30 --warmup 5 \
    --workers "$(nproc)") >"$out/torch_$kind.json" 2>>"$out/stderr.txt"
done
SHARES="${SHARES:-auto}" DECODES="${DECODES:-exact}" python3 - "$out" "$skip" ${KINDS:-synthetic mixed large} <<'PY' | tee "$out/folders.jsonl"
import json, os, statistics, sys
out, skip, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
bench = json.load(open(f"{out}/bench.json"))["img_per_s"]
print(json.dumps({"kind": "bench", "who": "castor", "img_per_s": bench}))
if os.path.exists(f"{out}/pipeline_bench.json"):
    print(json.dumps({"kind": "bench", "who": "castor, pipeline plan",
                      "img_per_s": json.load(open(f"{out}/pipeline_bench.json"))["img_per_s"]}))
for kind in kinds:
    for share, decode in [(s, d) for s in os.environ["SHARES"].split() for d in os.environ["DECODES"].split()]:
        try:
            rows = [json.loads(l) for l in open(f"{out}/castor_{kind}_{share}_{decode}.jsonl")][skip:]
            ips = statistics.median(r["img_per_s"] for r in rows)
            print(json.dumps({"kind": kind, "share": share, "decode": decode, "who": "castor", "img_per_s": round(ips, 1),
                              "of_bench": round(ips / bench, 3),
                              "data_wait_ms": statistics.median(r["data_wait_ms"] for r in rows),
                              "launch_wait_ms": statistics.median(r.get("launch_wait_ms", 0) for r in rows),
                              "final_share": rows[-1].get("host_decode_share")}))
        except Exception as e:
            print(json.dumps({"kind": kind, "share": share, "decode": decode, "who": "castor", "error": str(e)}))
        if os.path.exists(f"{out}/pipeline_{kind}_{share}_{decode}.jsonl"):
            rows = [json.loads(l) for l in open(f"{out}/pipeline_{kind}_{share}_{decode}.jsonl")][skip:]
            if rows:
                print(json.dumps({"kind": kind, "share": share, "decode": decode, "who": "castor, pipeline plan",
                                  "img_per_s": round(statistics.median(r["img_per_s"] for r in rows), 1),
                                  "data_wait_ms": statistics.median(r["data_wait_ms"] for r in rows)}))
    if not os.path.exists(f"{out}/torch_{kind}.json"):
        continue
    try:
        t = json.load(open(f"{out}/torch_{kind}.json"))
        print(json.dumps({"kind": kind, "who": "pytorch dataloader", "img_per_s": t["img_per_s"],
                          "of_castor_bench": round(t["img_per_s"] / bench, 3), "wait_share": t["data_wait_share"]}))
    except Exception as e:
        print(json.dumps({"kind": kind, "who": "pytorch dataloader", "error": str(e)}))
PY
