#!/usr/bin/env bash
# After a build, building again must do nothing (tablegen, protoc and links included).
set -euo pipefail
out=$(cmake --build "$1" -- -n -d explain 2>&1)
if ! grep -q "no work to do" <<<"$out"; then
  echo "a no-op rebuild would run:"
  echo "$out" | head -20
  exit 1
fi
