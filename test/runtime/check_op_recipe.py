#!/usr/bin/env python3
"""runtime/README.md's recipe for adding an element-wise op lists exactly the files that name its
example op (leaky_relu), README files and docs/ aside: the recipe cannot go stale."""
import re
import subprocess
import sys

root = sys.argv[1]
readme = open(f"{root}/runtime/README.md").read()
block = re.search(r"<!-- op-recipe -->(.*?)<!-- /op-recipe -->", readme, re.S)
if not block:
    sys.exit("runtime/README.md has no <!-- op-recipe --> block")
listed = set(re.findall(r"^- `([^`]+)`", block.group(1), re.M))
try:
    out = subprocess.run(["git", "-C", root, "grep", "-l", "-i", "-E", "leaky_?relu"], check=True,
                         capture_output=True, text=True).stdout
except (OSError, subprocess.CalledProcessError) as e:
    sys.exit(f"cannot list the repository's files with git grep: {e}")
this = "test/runtime/check_op_recipe.py"
naming = {f for f in out.split() if not f.startswith("docs/") and not f.endswith("README.md") and f != this}
if listed != naming:
    sys.exit("the recipe and the files naming leaky_relu differ:\n"
             f"  listed, naming nothing: {sorted(listed - naming)}\n"
             f"  naming it, not listed: {sorted(naming - listed)}")
if len(listed) > 8:
    sys.exit(f"an element-wise op touches {len(listed)} files; the recipe promises at most 8")
print(f"the recipe's {len(listed)} files are exactly those that name leaky_relu")
