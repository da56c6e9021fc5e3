#!/usr/bin/env python3
"""Compares two training states (safetensors, as `castor-run train --save` writes them) byte for byte.

    compare_states.py A.safetensors B.safetensors

Prints "bit-identical (N tensors, B bytes)" and exits 0 when the files are equal; otherwise prints
"FAIL: ..." naming the first differing tensor (in file order) and how many differ, and exits 1.
"""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return data, meta, base, tensors


def main():
    a_path, b_path = sys.argv[1], sys.argv[2]
    a, meta_a, base_a, tensors_a = read(a_path)
    b, meta_b, base_b, tensors_b = read(b_path)
    if a == b:
        print(f"bit-identical ({len(tensors_a)} tensors, {len(a)} bytes)")
        return 0
    if meta_a != meta_b:
        keys = sorted(k for k in set(meta_a) | set(meta_b) if meta_a.get(k) != meta_b.get(k))
        print(f"FAIL: the metadata differs ({', '.join(keys)})")
    index_b = dict(tensors_b)
    if [name for name, _ in tensors_a] != [name for name, _ in tensors_b]:
        print("FAIL: the files hold different tensors")
    differing = []
    for name, info in tensors_a:
        other = index_b.get(name)
        if other is None:
            continue
        sa, ea = info["data_offsets"]
        sb, eb = other["data_offsets"]
        if info["dtype"] != other["dtype"] or info["shape"] != other["shape"] or \
                a[base_a + sa:base_a + ea] != b[base_b + sb:base_b + eb]:
            differing.append(name)
    if differing:
        print(f"FAIL: first differing tensor {differing[0]} ({len(differing)} of {len(tensors_a)} tensors differ)")
    elif meta_a == meta_b:
        print("FAIL: the files differ outside the tensors' bytes")
    return 1


if __name__ == "__main__":
    sys.exit(main())
