#!/usr/bin/env bash
# Bit-identical training on the GPU under --deterministic: the plan trained STEPS steps on
# synthetic data twice with --deterministic and a shared tuning cache (filled first by a
# deterministic bench run, so that both runs read the same choices), the saved states compared
# byte for byte; then once without --deterministic, for its speed and how far it strays.
#
#   check_deterministic.sh CASTOR_RUN PLAN STEPS WORK_DIR
#
# Uses $CASTOR_TUNING_CACHE when set, else a fresh directory in WORK_DIR. Prints
# "deterministic: bit-identical ..." and exits 0 when the two deterministic states agree;
# "FAIL: ..." (naming the first differing tensor) and exit 1 otherwise.
set -u
run="$1" plan="$2" steps="$3" work="$4"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
mkdir -p "$work"
export CASTOR_TUNING_CACHE="${CASTOR_TUNING_CACHE:-$work/tuning}"
unset CASTOR_DETERMINISTIC

# Layers timed and from the cache, from the backend's load line on stderr.
tuning() { grep -o "[0-9]* layers timed, [0-9]* from cache" "$1" | tail -1; }
# img/s of train's summary line.
imgs() { grep -o "[0-9.]* img/s" "$1" | tail -1; }

"$run" bench "$plan" --device cuda --deterministic --steps 3 --warmup 1 --json >"$work/fill.json" 2>"$work/fill.err" ||
  { echo "FAIL: the deterministic bench run failed: $(tail -3 "$work/fill.err")"; exit 1; }
echo "cache filled ($(tuning "$work/fill.err"))"
for r in A B; do
  "$run" train "$plan" --device cuda --steps "$steps" --data synthetic --seed 0 --deterministic \
    --save "$work/$r.safetensors" >"$work/$r.out" 2>"$work/$r.err" ||
    { echo "FAIL: deterministic run $r failed: $(tail -3 "$work/$r.err")"; exit 1; }
  echo "deterministic run $r: $(imgs "$work/$r.out") ($(tuning "$work/$r.err"))"
done
"$run" train "$plan" --device cuda --steps "$steps" --data synthetic --seed 0 --save "$work/C.safetensors" \
  >"$work/C.out" 2>"$work/C.err" || { echo "FAIL: the run without --deterministic failed: $(tail -3 "$work/C.err")"; exit 1; }
echo "run without --deterministic: $(imgs "$work/C.out") ($(tuning "$work/C.err"))"
echo "without against with --deterministic (information only): $(python3 "$here/compare_states.py" \
  "$work/A.safetensors" "$work/C.safetensors" | tail -1 | sed 's/^FAIL: //')"
result="$(python3 "$here/compare_states.py" "$work/A.safetensors" "$work/B.safetensors")"
status=$?
echo "deterministic: $result"
exit $status
