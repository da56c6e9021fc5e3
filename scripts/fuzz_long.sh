#!/usr/bin/env bash
# The long fuzzing runs behind docs/reliability.md: every reader of untrusted input under
# AddressSanitizer (and UndefinedBehaviorSanitizer for the runtime's), far beyond CI's short runs.
#
#   scripts/fuzz_long.sh [ITERATIONS] [OUT_DIR]     # default 1000000 and build/fuzz-long
#
# Needs the build (scripts/build.sh). Writes OUT_DIR/<reader>.log (the fuzzer's summary: inputs,
# accepted, refused, distinct refusals, inputs/s) and OUT_DIR/<reader>.txt (each kind of refusal,
# its numbers replaced by N, with its count).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-1000000}"
out="${2:-$root/build/fuzz-long}"
mkdir -p "$out"
ninja -C "$root/build" castor-runtime-fuzz castor-import-fuzz castor castor-run >/dev/null
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
for target in image safetensors tuning-cache plan; do
  { time python3 "$root/test/fuzz/run_runtime_fuzz.py" --fuzzer "$root/build/bin/castor-runtime-fuzz" \
      --iterations "$n" --bin "$root/build/bin" --models "$root/models" --images "$root/test/fixtures/images" \
      --work "$out/seeds" --targets "$target" --messages-dir "$out"; } >"$out/$target.log" 2>&1
done
{ time python3 "$root/test/fuzz/run_fuzz.py" "$root/build/bin/castor-import-fuzz" "$n" "$root/models" \
    "$out/onnx-seeds"; } >"$out/onnx.log" 2>&1
tail -n 4 "$out"/*.log
