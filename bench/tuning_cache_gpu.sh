#!/usr/bin/env bash
# The tuning cache's handling of damaged, foreign and shared files on the GPU machine, from the
# repository root, with what scripts/build_gpu.sh put in gpu-carry/ (about a minute):
# test/cuda/check_tuning_cache.sh on gpu-carry/plans/tiny_fp16_adamw.plan and
# tiny_bf16_adamw.plan in a fresh cache directory: a garbage file and one naming another GPU are
# ignored with a warning and rewritten as valid caches; a damaged line among good entries is
# warned about and the entries kept; two castor-run bench processes at once on an empty cache
# leave a valid file holding both plans' entries (later runs time no layer).
#
#   bench/tuning_cache_gpu.sh [OUT_DIR]      # default $OUT
#
# Pass: "tuning cache: PASS" last (every check line "ok ..."); a failed check prints "FAIL: ...".
# Results: OUT_DIR/tuning_cache.txt, each run's stderr and the cache in OUT_DIR/tuning_cache/.
set -u
out="${1:-$OUT}"
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$out"
timeout 300 test/cuda/check_tuning_cache.sh "$bin/castor-run" "$carry/plans/tiny_fp16_adamw.plan" \
  "$carry/plans/tiny_bf16_adamw.plan" "$out/tuning_cache" >"$out/tuning_cache.txt" 2>&1
status=$?
cat "$out/tuning_cache.txt"
exit "$status"
