#!/usr/bin/env python3
"""The largest ResNet-50 batch PyTorch trains under a device-memory cap, for the same question
`castor compile --recompute auto --memory-budget` answers: the cap is set with
torch.cuda.set_per_process_memory_fraction (24 GiB by default, the RTX 4090's memory) and the
batch found by bisection (multiples of 8) on whether two training steps of torch_resnet50.py's
`bench` (AdamW, synthetic data on the GPU) run out of memory. One JSON line per mode.

  python3 torch_max_batch.py --modes amp-fp16-cl,ckpt-fp16-cl --cap-gib 24
"""
import argparse
import gc
import json

import torch

from torch_resnet50 import bench


def fits(mode, batch):
    try:
        bench(mode, batch, 1, 2)
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        gc.collect()
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="amp-fp16-cl,ckpt-fp16-cl")
    ap.add_argument("--cap-gib", type=float, default=24.0)
    ap.add_argument("--low", type=int, default=128)
    ap.add_argument("--high", type=int, default=2048)
    a = ap.parse_args()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(a.cap_gib * 2**30 / total)
    for mode in a.modes.split(","):
        lo, hi = a.low, a.high  # fits(lo) assumed, checked below; not fits(hi)
        if not fits(mode, lo):
            print(json.dumps(dict(mode=mode, cap_gib=a.cap_gib, largest_batch=None, note=f"batch {lo} does not fit")))
            continue
        while hi - lo > 8:
            mid = (lo + hi) // 16 * 8
            if fits(mode, mid):
                lo = mid
            else:
                hi = mid
        print(json.dumps(dict(system="pytorch-" + torch.__version__, mode=mode, cap_gib=a.cap_gib, largest_batch=lo,
                              gpu=torch.cuda.get_device_name())), flush=True)


if __name__ == "__main__":
    main()
