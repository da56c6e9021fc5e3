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
#                                         # TORCH (default 1; 0 leaves PyTorch's DataLoader out)
# OUT_DIR/folders.jsonl: one line a run (kind, share, who, img/s, its ratio to bench, median data wait).
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
plan="$carry/plans/r50_fp16_b256.plan" steps=${STEPS:-80} skip=20
timeout 200 "$bin/castor-run" bench "$plan" --device cuda --steps 30 --warmup 5 --json 2>>"$out/stderr.txt" |
  tail -1 >"$out/bench.json"
for kind in ${KINDS:-synthetic mixed large}; do
  folder=/tmp/folder-$kind
  [ -d "$folder" ] || python3 scripts/make_image_folder.py --kind "$kind" --out "$folder" --classes 1000 \
    --per-class "${PER_CLASS:-8}" --quality 90 --seed 1 --jobs "$(nproc)" >>"$out/stderr.txt" 2>&1
  du -sh "$folder" | sed "s/^/$kind: /" >>"$out/stderr.txt"
  for share in ${SHARES:-auto}; do
    timeout 200 "$bin/castor-run" train "$plan" --device cuda --steps "$steps" --data "folder:$folder" \
      --host-decode-share "$share" --log-json "$out/castor_${kind}_$share.jsonl" >>"$out/stderr.txt" 2>&1
  done
  [ "${TORCH:-1}" = 0 ] && continue
  (cd "$carry" && timeout 300 python3 torch_folder_train.py "$folder" --batch 256 --steps 30 --warmup 5 \
    --workers "$(nproc)") >"$out/torch_$kind.json" 2>>"$out/stderr.txt"
done
SHARES="${SHARES:-auto}" python3 - "$out" "$skip" ${KINDS:-synthetic mixed large} <<'PY' | tee "$out/folders.jsonl"
import json, os, statistics, sys
out, skip, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
bench = json.load(open(f"{out}/bench.json"))["img_per_s"]
print(json.dumps({"kind": "bench", "who": "castor", "img_per_s": bench}))
for kind in kinds:
    for share in os.environ["SHARES"].split():
        try:
            rows = [json.loads(l) for l in open(f"{out}/castor_{kind}_{share}.jsonl")][skip:]
            ips = statistics.median(r["img_per_s"] for r in rows)
            print(json.dumps({"kind": kind, "share": share, "who": "castor", "img_per_s": round(ips, 1),
                              "of_bench": round(ips / bench, 3),
                              "data_wait_ms": statistics.median(r["data_wait_ms"] for r in rows),
                              "launch_wait_ms": statistics.median(r.get("launch_wait_ms", 0) for r in rows),
                              "final_share": rows[-1].get("host_decode_share")}))
        except Exception as e:
            print(json.dumps({"kind": kind, "share": share, "who": "castor", "error": str(e)}))
    if not os.path.exists(f"{out}/torch_{kind}.json"):
        continue
    try:
        t = json.load(open(f"{out}/torch_{kind}.json"))
        print(json.dumps({"kind": kind, "who": "pytorch dataloader", "img_per_s": t["img_per_s"],
                          "of_castor_bench": round(t["img_per_s"] / bench, 3), "wait_share": t["data_wait_share"]}))
    except Exception as e:
        print(json.dumps({"kind": kind, "who": "pytorch dataloader", "error": str(e)}))
PY
