# Sourced by the device-call scripts (docs/results/<dir>/runN.sh) after bench/gpu_env.sh: one
# `castor-run bench` of a plan as one row of the call's record.
#
#   bench_row LABEL BINARY_DIR PLAN STEPS [ENV=VALUE...]
#
# runs $carry/BINARY_DIR/castor-run bench on $carry/plans/PLAN.plan (STEPS event-timed steps after
# 5 warm-up steps, --json, with the ENV assignments) on the tuning cache /tmp/tc-LABEL (its own per
# label: the first run of a label tunes it, later ones read it), appends the JSON line with its
# label to $OUT/castor.jsonl and prints img/s, median step, peak memory, kernel time and the
# fused layers' ways. BENCH_DEVICE (default cuda) and BENCH_LIMIT (seconds, default 100) apply.
bench_row() {
  local label=$1 dir=$2 plan=$3 steps=$4
  shift 4
  local cache=/tmp/tc-$label
  mkdir -p "$cache"
  env CASTOR_TUNING_CACHE="$cache" "$@" timeout "${BENCH_LIMIT:-100}" "$carry/$dir/castor-run" bench \
    "$carry/plans/$plan.plan" --device "${BENCH_DEVICE:-cuda}" --steps "$steps" --warmup 5 --json \
    >/tmp/bench_row.json 2>/tmp/bench_row.err
  local rc=$?
  python3 - "$label" "$rc" /tmp/bench_row.json "${OUT:-.}/castor.jsonl" <<'PY'
import json, sys
label, rc, path, log = sys.argv[1:]
try:
    d = json.loads(open(path).read().strip().splitlines()[-1])
except Exception as e:
    print(f"== {label}: rc {rc}, no JSON ({e})")
    sys.exit()
d["label"] = label
with open(log, "a") as f:
    f.write(json.dumps(d) + "\n")
print(f"== {label}: rc {rc} img/s {d['img_per_s']} median {d['median_ms']} ms peak {d['peak_gib']} GiB "
      f"kernel {d.get('kernel_total_ms')} ms ways {d.get('fusion', {}).get('ways')}")
PY
  grep -iE "error|does not fit" /tmp/bench_row.err | head -3
  return $rc
}
