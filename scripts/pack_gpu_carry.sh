#!/usr/bin/env bash
# Packs gpu-carry/ (scripts/build_gpu.sh's output: binaries, libraries, plans) into one xz archive,
# gpu-carry-packed/carry.tar.xz, a quarter of its size, so that every binary and plan fits in a
# device call's carry limit. bench/gpu_env.sh unpacks it on the GPU machine. Both are git-ignored.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$root/gpu-carry-packed"
tar -C "$root/gpu-carry" -cf - . | xz -T0 -6 >"$root/gpu-carry-packed/carry.tar.xz.tmp"
mv "$root/gpu-carry-packed/carry.tar.xz.tmp" "$root/gpu-carry-packed/carry.tar.xz"
du -h "$root/gpu-carry-packed/carry.tar.xz"
