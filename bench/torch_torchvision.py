#!/usr/bin/env python3
"""PyTorch baseline for any torchvision or timm classification model, in the same device call as
Castor: `castor-run bench` of a plan compiled from that model's ONNX export (test/fixtures/torchvision,
scripts/export_model_zoo.py for timm) does the same work (synthetic data resident on the GPU, AdamW lr 1e-3 weight decay 0.01,
cross-entropy, fixed batch), so the two figures form a ratio.

  python3 torch_torchvision.py --model vgg11_bn --modes amp-fp16-cl,compile-fp16-cl --batch 128
  python3 torch_torchvision.py --model timm-convnext_tiny --batch 128   # timm.create_model("convnext_tiny")

Prints one JSON line per mode: img/s (median of CUDA-event-timed steps) and peak GPU memory.
Modes: amp-fp16-cl, amp-bf16-cl, compile-fp16-cl, compile-bf16-cl (channels-last, autocast,
GradScaler for fp16; compile: torch.compile of the whole step).
"""
import argparse
import json
import statistics
import time

import torch
import torchvision
from torch import nn


def median_step_ms(step, iters):
    """The median of `iters` runs of `step`, each timed by CUDA events around it."""
    ms = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def build_model(name):
    """A torchvision constructor, or timm's model for a name "timm-NAME"; with its input size."""
    if name.startswith("timm-"):
        import timm
        model = timm.create_model(name[len("timm-"):], pretrained=False)
        return model, tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    return getattr(torchvision.models, name)(), (3, 224, 224)


def bench(model_name, mode, batch, warmup, iters):
    torch.backends.cudnn.benchmark = True
    dtype = torch.bfloat16 if "bf16" in mode else torch.float16
    torch.manual_seed(0)
    model, input_size = build_model(model_name)
    model = model.cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
    x = torch.randn(batch, *input_size, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    if mode.startswith("compile"):
        step = torch.compile(step)
    t0 = time.time()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    torch.cuda.reset_peak_memory_stats()
    med = median_step_ms(step, iters)
    return dict(system="pytorch-" + torch.__version__, model=model_name, mode=mode, batch=batch,
                ms_per_step=round(med, 2), img_per_s=round(batch * 1000 / med, 1),
                peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2), warmup_s=round(warm_s, 1),
                gpu=torch.cuda.get_device_name())


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="a torchvision.models constructor, e.g. resnext50_32x4d, or timm-NAME for timm's NAME")
    ap.add_argument("--modes", default="amp-fp16-cl")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args()
    for mode in a.modes.split(","):
        print(json.dumps(bench(a.model, mode, a.batch, a.warmup, a.iters)), flush=True)
        torch.cuda.empty_cache()
