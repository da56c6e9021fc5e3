#!/usr/bin/env python3
"""How far one training step of a plan moves when only rounding changes, on the CPU reference.

The CPU/CUDA agreement test (cuda_agreement.cpp) holds every tensor of fp16/bf16 plans to 1e-2
norm-wise. A few tensors miss it. This script asks whether any implementation could meet that:
it runs one step of the same plan on the CPU reference twice, on the same batch and on the same
batch with a fraction of its pixels moved by one unit in the last place of the plan's low
precision (the size of one rounding difference in a cast), and prints the tensors that move the
most. A tensor that moves as much here as between the CPU and the GPU is at the mercy of rounding
(e.g. an AdamW step of a parameter whose gradient is a cancelling sum near zero: the step is
+-lr whatever its size), not of a backend bug.

  rounding_sensitivity.py CASTOR_RUN PLAN [--fraction 0.01] [--ulp 2**-10] [--top 3]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    types = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] not in types:
            continue
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=types[meta["dtype"]]).astype(np.float64)
    return out


def plan_images_shape(castor_run, plan):
    info = json.loads(subprocess.run([castor_run, "inspect", plan, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    plan = info["plan"]
    ids = {b["name"]: b["tensor"] for b in plan["inputs"]}
    for t in plan["tensors"]:
        if t["id"] == ids["images"]:
            return [int(d) for d in t["shape"]]
    sys.exit("the plan has no images input")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("castor_run")
    ap.add_argument("plan")
    ap.add_argument("--fraction", type=float, default=0.01, help="share of pixels moved")
    ap.add_argument("--ulp", type=float, default=2.0 ** -10, help="relative move (fp16: 2^-10, bf16: 2^-7)")
    ap.add_argument("--top", type=int, default=3)
    a = ap.parse_args()
    shape = plan_images_shape(a.castor_run, a.plan)
    rng = np.random.default_rng(0)
    images = rng.standard_normal(shape).astype(np.float32)
    labels = rng.integers(0, 10, shape[0]).astype(np.int64)
    moved = images.copy()
    mask = rng.random(shape) < a.fraction
    moved[mask] *= np.float32(1 + a.ulp)
    with tempfile.TemporaryDirectory() as tmp:
        states = []
        for name, x in (("same", images), ("moved", moved)):
            d = os.path.join(tmp, name)
            os.makedirs(d)
            np.save(os.path.join(d, "images.npy"), x)
            np.save(os.path.join(d, "labels.npy"), labels)
            out = os.path.join(tmp, name + ".safetensors")
            subprocess.run([a.castor_run, "train", a.plan, "--steps", "1", "--data", "npy:" + d, "--save", out],
                           check=True, capture_output=True)
            states.append(load_safetensors(out))
    rows = []
    for name, x in states[0].items():
        ref = np.linalg.norm(x)
        diff = np.linalg.norm(x - states[1][name])
        rows.append((diff / ref if ref > 1e-12 else diff, name))
    rows.sort(reverse=True)
    print(f"{os.path.basename(a.plan)}: {int(mask.sum())} of {mask.size} pixels moved by {a.ulp:.3g} relative; "
          "largest norm-wise relative changes after one step:")
    for rel, name in rows[:a.top]:
        print(f"  {rel:.2e}  {name}")


if __name__ == "__main__":
    main()
