#!/usr/bin/env bash
# Bit-identical training under --deterministic on the GPU machine, from the repository root, with
# what scripts/build_gpu.sh put in gpu-carry/ (about 2 minutes):
#   1. ResNet-50 fp16 batch 256 (gpu-carry/plans/r50_fp16_b256.plan) trained 50 steps on
#      synthetic data twice with --deterministic (a fresh tuning cache, filled first by a
#      deterministic bench run), the saved states compared byte for byte
#      (test/cuda/check_deterministic.sh); a third run without --deterministic; img/s of each
#      from train's summary line;
#   2. castor-run bench --json of the same plan with and without --deterministic (median img/s).
#   3. The small plan's check (tiny_fp16_adamw, 20 steps), as the CTest `cuda.deterministic` runs it.
#
#   bench/deterministic_gpu.sh [OUT_DIR]      # default $OUT
#
# Pass: both "deterministic: bit-identical" lines and "PASS" at the end; a failure prints
# "FAIL: first differing tensor <name> (...)". Results: OUT_DIR/deterministic.txt, the runs'
# output in OUT_DIR/r50/ and OUT_DIR/tiny/, bench lines in OUT_DIR/bench.jsonl.
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
log="$out/deterministic.txt"
: >"$log"
export CASTOR_TUNING_CACHE="$(mktemp -d /tmp/castor-deterministic-tuning.XXXXXX)"
plan="$carry/plans/r50_fp16_b256.plan"
status=0

echo "== ResNet-50 fp16 batch 256, 50 steps ($(date +%T))" >>"$log"
timeout 400 test/cuda/check_deterministic.sh "$bin/castor-run" "$plan" 50 "$out/r50" >>"$log" 2>&1 || status=1

echo "== castor-run bench, with and without --deterministic ($(date +%T))" >>"$log"
: >"$out/bench.jsonl"
for flag in --deterministic "" --deterministic ""; do
  timeout 120 "$bin/castor-run" bench "$plan" --device cuda --steps 20 --warmup 5 --json $flag 2>>"$out/bench_stderr.txt" |
    tail -1 >>"$out/bench.jsonl"
done
python3 - "$out/bench.jsonl" >>"$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {True: [], False: []}
for r in rows:
    by[bool(r.get("deterministic"))].append(r["img_per_s"])
if by[True] and by[False]:
    d, n = statistics.median(by[True]), statistics.median(by[False])
    print(f"bench img/s: deterministic {d:.0f}, not {n:.0f} (deterministic/not {d / n:.3f}; runs {by[True]} {by[False]})")
else:
    print(f"bench: missing runs ({len(by[True])} deterministic, {len(by[False])} not)")
PY

echo "== tiny_fp16_adamw, 20 steps ($(date +%T))" >>"$log"
timeout 120 test/cuda/check_deterministic.sh "$bin/castor-run" "$carry/plans/tiny_fp16_adamw.plan" 20 "$out/tiny" \
  >>"$log" 2>&1 || status=1

[ "$status" = 0 ] && echo "PASS" >>"$log" || echo "FAIL" >>"$log"
cat "$log"
exit "$status"
