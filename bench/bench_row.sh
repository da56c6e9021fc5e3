# Sourced by bench/device_call.sh (and any device call's own script) after bench/gpu_env.sh: one
# `castor-run bench` of a plan as one row of the call's record.
#
#   bench_row LABEL BINARY_DIR PLAN STEPS [ENV=VALUE...]
#
# runs $carry/BINARY_DIR/castor-run bench on $carry/plans/PLAN.plan (STEPS event-timed steps after
# BENCH_WARMUP warm-up steps, default 5, --json, with the ENV assignments) on the tuning cache
# /tmp/tc-LABEL (its own per label: the first run of a label tunes it, later ones read it),
# appends the JSON line to $OUT/castor.jsonl with the label, the binary folder, the assignments,
# the model, precision and batch read from the plan's name (MODEL_PRECISION_bBATCH[_VARIANT]), the
# process's wall time and the tuner's summary line from stderr, and prints img/s, median step,
# peak memory, kernel time and the fused layers' ways. BENCH_DEVICE (default cuda) and
# BENCH_LIMIT (seconds, default 100) apply.
bench_row() {
  local label=$1 dir=$2 plan=$3 steps=$4
  shift 4
  local cache=/tmp/tc-$label t0
  mkdir -p "$cache"
  t0=$(date +%s.%N)
  env CASTOR_TUNING_CACHE="$cache" "$@" timeout "${BENCH_LIMIT:-100}" "$carry/$dir/castor-run" bench \
    "$carry/plans/$plan.plan" --device "${BENCH_DEVICE:-cuda}" --steps "$steps" --warmup "${BENCH_WARMUP:-5}" \
    --json >/tmp/bench_row.json 2>/tmp/bench_row.err
  local rc=$?
  python3 - "$label" "$rc" /tmp/bench_row.json "${OUT:-.}/castor.jsonl" "$dir" "$plan" "$t0" "$(date +%s.%N)" \
    "$@" <<'PY'
import json, re, sys
label, rc, path, log, build, plan, t0, t1 = sys.argv[1:9]
try:
    d = json.loads(open(path).read().strip().splitlines()[-1])
except Exception as e:
    print(f"== {label}: rc {rc}, no JSON ({e})")
    sys.exit()
m = re.match(r"(.+?)_(fp16|bf16|fp32)_b(\d+)(?:_(.+))?$", plan)
if m:
    d.update(model={"r50": "resnet50"}.get(m[1], m[1]), precision=m[2])
    if m[4]:
        d["variant"] = m[4]
d.update(label=label, build=build, env=sys.argv[9:], wall_s=round(float(t1) - float(t0), 2))
err = open("/tmp/bench_row.err", errors="replace").read().splitlines()
d["stderr_summary"] = [l for l in err if l.startswith(("castor-run: cuda tuning:", "castor-run: cuda load"))]
with open(log, "a") as f:
    f.write(json.dumps(d) + "\n")
print(f"== {label}: rc {rc} img/s {d['img_per_s']} median {d['median_ms']} ms peak {d['peak_gib']} GiB "
      f"kernel {d.get('kernel_total_ms')} ms load {d.get('load_s')} s first step {d.get('first_step_s')} s "
      f"ways {d.get('fusion', {}).get('ways')}")
PY
  grep -iE "error|does not fit" /tmp/bench_row.err | head -3
  return $rc
}
