#!/usr/bin/env bash
# Two castor-run builds on the same plans, in the same device call: the check that a change of
# the runtime costs no speed. Runs A and B alternately (A B A B ...) so that drift of the GPU's
# clocks or temperature falls on both, then prints each run and the median img/s per build.
#
#   bench/ab_castor_run.sh A_CASTOR_RUN B_CASTOR_RUN OUT_JSONL PLAN... 
#
# Environment: ROUNDS (3), STEPS (20), WARMUP (5). Uses the tuning cache of CASTOR_TUNING_CACHE
# (warm it first so that neither build pays the first tuning).
set -uo pipefail
a="$1" b="$2" out="$3"
shift 3
rounds="${ROUNDS:-3}" steps="${STEPS:-20}" warmup="${WARMUP:-5}"
: >"$out"
for plan in "$@"; do
  for r in $(seq 1 "$rounds"); do
    for side in A B; do
      bin=$a; [ "$side" = B ] && bin=$b
      "$bin" bench "$plan" --device cuda --steps "$steps" --warmup "$warmup" --json 2>/dev/null | tail -1 |
        sed "s|^{|{\"build\": \"$side\", \"plan\": \"$(basename "$plan")\", \"round\": $r, |" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
for plan in sorted({r['plan'] for r in rows}):
    med = {}
    for side in 'AB':
        v = [r['img_per_s'] for r in rows if r['plan'] == plan and r['build'] == side and 'img_per_s' in r]
        med[side] = statistics.median(v) if v else float('nan')
        print(f"{plan} {side}: median {med[side]:.1f} img/s over {len(v)} runs {sorted(round(x) for x in v)}")
    print(f"{plan} B/A: {med['B'] / med['A']:.4f}")
PY
