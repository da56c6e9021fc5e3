"""Checks the arena size that `castor compile` reports against the sum of all tensors.

Usage: castor compile ... 2>&1 | check_arena.py MAX_PERCENT
"""
import re
import sys

limit = float(sys.argv[1])
report = sys.stdin.read()
m = re.search(r"tensors: \d+, ([0-9.]+) MiB in all; arena ([0-9.]+) MiB \(([0-9.]+)% of all tensors\)", report)
if not m:
    sys.exit("no arena line in the compile report:\n" + report)
total, arena, percent = map(float, m.groups())
print(f"arena {arena:.1f} MiB of {total:.1f} MiB in all tensors: {percent:.1f}% (limit {limit:g}%)")
if not (0 < arena <= total and percent <= limit):
    sys.exit(1)
