#!/usr/bin/env python3
"""PyTorch DistributedDataParallel baseline for Castor's data-parallel runs, one process per GPU
under torchrun (the same model, optimizer and per-GPU batch as the Castor plan: a torchvision
classifier, AdamW lr 1e-3 weight decay 0.01, AMP in fp16 with GradScaler, channels-last, synthetic
data resident on each GPU, DDP's default 25 MiB buckets):

  torchrun --nproc-per-node 2 bench/torch_ddp.py --model resnet50 --batch 256

Rank 0 prints one JSON line: the job's img/s (every GPU's images over the median step time), the
per-GPU rate and rank 0's peak memory.
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torchvision
from torch import nn

from torch_torchvision import median_step_ms  # the same timing as the single-GPU baseline


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=256, help="per GPU")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)().cuda().to(memory_format=torch.channels_last)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(args.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    med = median_step_ms(step, args.iters)
    if rank == 0:
        print(json.dumps(dict(system="pytorch-ddp-" + torch.__version__, model=args.model, gpus=world,
                              batch_per_gpu=args.batch, ms_per_step=round(med, 2),
                              img_per_s=round(world * args.batch * 1000 / med, 1),
                              img_per_s_per_gpu=round(args.batch * 1000 / med, 1),
                              peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2))), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
