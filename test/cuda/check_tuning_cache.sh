#!/usr/bin/env bash
# The tuning cache on the GPU (runtime/cuda/tuning/tuning_cache.h), with castor-run bench on two
# training plans whose tuned layers differ (e.g. fp16 and bf16), in a fresh cache directory:
#   1. a cache file of garbage, then one whose header names another GPU, then one with a damaged
#      line among good entries: each run warns once on stderr naming the file and why; the first
#      two are rewritten as valid caches of this GPU (every layer timed again), the third keeps
#      its entries (no layer timed);
#   2. two runs at once, one per plan, on an empty cache: the file holds both runs' entries in
#      valid lines (a third and fourth run time no layer), and no temporary file is left.
#
#   check_tuning_cache.sh CASTOR_RUN PLAN_A PLAN_B WORK_DIR
#
# Prints one line per check ("ok ..." or "FAIL: ...") and "tuning cache: PASS" or
# "tuning cache: FAIL" last; exits 0 when every check passed.
set -u
run="$1" plan_a="$2" plan_b="$3" work="$4"
rm -rf "$work"
mkdir -p "$work/cache"
export CASTOR_TUNING_CACHE="$work/cache"
unset CASTOR_DETERMINISTIC
failures=0
ok() { echo "ok $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# bench PLAN NAME: one castor-run bench (stderr in WORK_DIR/NAME.err); false when it fails.
bench() {
  "$run" bench "$1" --device cuda --steps 2 --warmup 1 --json >"$work/$2.json" 2>"$work/$2.err"
}
timed() { grep -o "[0-9]* layers timed" "$work/$1.err" | tail -1 | cut -d' ' -f1; }
# valid FILE: every line a comment, or "<key>\t<candidate>\t<number>"; a header naming a GPU.
valid() {
  awk -F'\t' '/^#/ || /^$/ { next } NF != 3 || $1 == "" || $2 == "" || $3 !~ /^[0-9.eE+-]+$/ { bad++ }
              END { exit bad > 0 }' "$1" && grep -q "^# GPU .* SMs), cuDNN [0-9]*\.$" "$1"
}
entries() { grep -vc "^#" "$1"; }

bench "$plan_a" first || { fail "the first run failed: $(tail -3 "$work/first.err")"; echo "tuning cache: FAIL"; exit 1; }
file="$(ls "$CASTOR_TUNING_CACHE"/tuning-*.txt 2>/dev/null | head -1)"
if [ -z "$file" ] || [ "$(timed first)" = 0 ]; then
  fail "the first run made no cache file or timed no layer ($(timed first) timed)"
  echo "tuning cache: FAIL"
  exit 1
fi
layers="$(timed first)"
ok "first run: $layers layers timed into $(basename "$file") ($(entries "$file") entries)"
good="$(cat "$file")"

# 1a. Garbage.
printf 'garbage \001\002\nnot\ta tuning entry\n\tno key\t1\n' >"$file"
bench "$plan_a" garbage || fail "the run on a garbage cache failed: $(tail -3 "$work/garbage.err")"
if grep -q "lines of $file are not tuning entries; they are dropped when the cache is next written" "$work/garbage.err"; then
  ok "garbage: warned ($(grep "tuning cache" "$work/garbage.err" | head -1))"
else
  fail "garbage: no warning naming $file (stderr: $(head -3 "$work/garbage.err"))"
fi
if valid "$file" && ! grep -q garbage "$file" && [ "$(timed garbage)" = "$layers" ]; then
  ok "garbage: rewritten as a valid cache ($(entries "$file") entries, $(timed garbage) layers timed)"
else
  fail "garbage: the file was not rewritten as a valid cache ($(timed garbage) layers timed): $(head -5 "$file")"
fi

# 1b. A header naming another GPU and cuDNN.
printf '%s\n' "$good" | sed 's/^# GPU .*/# GPU Another GPU (7 SMs), cuDNN 1./' >"$file"
bench "$plan_a" foreign || fail "the run on a foreign cache failed: $(tail -3 "$work/foreign.err")"
if grep -q "$file was written for Another GPU (7 SMs), cuDNN 1, not .*: its entries are ignored" "$work/foreign.err"; then
  ok "foreign: warned ($(grep "tuning cache" "$work/foreign.err" | head -1))"
else
  fail "foreign: no warning naming $file and the other GPU (stderr: $(head -3 "$work/foreign.err"))"
fi
if valid "$file" && ! grep -q "Another GPU" "$file" && [ "$(timed foreign)" = "$layers" ]; then
  ok "foreign: ignored and rewritten for this GPU ($(grep "^# GPU" "$file"), $(timed foreign) layers timed)"
else
  fail "foreign: not rewritten for this GPU ($(timed foreign) layers timed): $(grep "^# GPU" "$file")"
fi

# 1c. Good entries and one damaged line: the entries serve, one warning.
printf '%s\nconv2d.fprop|cut off here\n' "$good" >"$file"
bench "$plan_a" damaged || fail "the run on a damaged cache failed: $(tail -3 "$work/damaged.err")"
if grep -q "1 line of $file is not a tuning entry" "$work/damaged.err" && [ "$(timed damaged)" = 0 ]; then
  ok "damaged line: warned, the good entries kept (0 layers timed)"
else
  fail "damaged line: $(timed damaged) layers timed, stderr: $(grep "tuning cache" "$work/damaged.err" | head -2)"
fi

# 2. Two runs at once on an empty cache.
rm -f "$CASTOR_TUNING_CACHE"/*
bench "$plan_a" concurrent_a &
pid_a=$!
bench "$plan_b" concurrent_b &
pid_b=$!
wait "$pid_a" || fail "concurrent run A failed: $(tail -3 "$work/concurrent_a.err")"
wait "$pid_b" || fail "concurrent run B failed: $(tail -3 "$work/concurrent_b.err")"
ok "two runs at once: $(timed concurrent_a) and $(timed concurrent_b) layers timed"
if valid "$file" && ! grep -q "not tuning entr\|not a tuning entry\|was written for" "$work"/concurrent_*.err; then
  ok "two runs at once: the file is a valid cache ($(entries "$file") entries)"
else
  fail "two runs at once: the file is not a valid cache: $(head -5 "$file")"
fi
leftover="$(ls "$CASTOR_TUNING_CACHE" | grep -v '^tuning-.*\.txt$' | grep -v '\.txt\.lock$')"
[ -z "$leftover" ] && ok "no temporary file left" || fail "left in the cache directory: $leftover"
bench "$plan_a" again_a || fail "run A again failed"
bench "$plan_b" again_b || fail "run B again failed"
if [ "$(timed again_a)" = 0 ] && [ "$(timed again_b)" = 0 ]; then
  ok "both plans' layers were kept: runs after them time no layer"
else
  fail "entries were lost: runs after them timed $(timed again_a) and $(timed again_b) layers"
fi

if [ "$failures" = 0 ]; then echo "tuning cache: PASS"; else echo "tuning cache: FAIL ($failures)"; exit 1; fi
