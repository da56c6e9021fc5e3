#!/usr/bin/env bash
# Device call of 2026-12-01 (binaries and plans of 46ffd16; scripts/build_gpu.sh, bench/compile_recompute_plans.sh):
bash bench/recompute_gpu.sh 1
