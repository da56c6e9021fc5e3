#!/usr/bin/env python3
"""Every op of the runtime's registry (runtime/plan/ops.def) has its row in the specification
(runtime/plan/ops.md), and the specification documents no op the registry lacks."""
import re
import sys

ops_def, ops_md = sys.argv[1], sys.argv[2]
text = open(ops_def).read()
registry = re.findall(r'^CASTOR_OP\(\w+, "(\w+)", \w+\)', text, re.M)
# An element-wise line stands for the op and its gradient.
for name in re.findall(r'^CASTOR_ELEMENTWISE_OP\(\w+, "(\w+)"\)', text, re.M):
    registry += [name, name + "_backward"]
documented = set()
for row in re.findall(r'^\| ([^|]+) \|', open(ops_md).read(), re.M):
    documented.update(re.findall(r'`(\w+)`', row))
missing = [op for op in registry if op not in documented]
unknown = sorted(documented - set(registry))
if len(registry) != len(set(registry)):
    sys.exit(f"ops.def names an op twice: {sorted(op for op in registry if registry.count(op) > 1)}")
if missing:
    sys.exit(f"ops in ops.def without a row in ops.md: {', '.join(missing)}")
if unknown:
    sys.exit(f"ops in ops.md that ops.def lacks: {', '.join(unknown)}")
print(f"{len(registry)} ops, each specified once in ops.md")
