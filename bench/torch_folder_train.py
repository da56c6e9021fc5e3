#!/usr/bin/env python3
"""PyTorch baseline for training from an image folder, to run in the same device call as Castor.

torchvision ImageFolder with RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize,
a DataLoader with --workers workers and pinned memory, feeding ResNet-50 AMP fp16 channels-last
with AdamW, as `castor-run train --data folder:DIR` feeds a ResNet-50 plan. Prints one JSON line:
img/s over the timed steps (wall clock, data loading included) and the share of the time the step
waited for the loader.

  python3 torch_folder_train.py DIR --batch 256 --steps 30 --warmup 5 --workers 16
"""
import argparse, json, time
import torch, torchvision
from torch import nn
from torchvision import transforms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--workers", type=int, default=16)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = torchvision.datasets.ImageFolder(a.dir, tf)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                         pin_memory=True, drop_last=True, persistent_workers=True, prefetch_factor=4)
    model = torchvision.models.resnet50(num_classes=len(data.classes)).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    done, waited, timed_images, start = 0, 0.0, 0, None
    while done < a.warmup + a.steps:
        t_wait = time.time()
        for x, y in loader:
            x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
            y = y.cuda(non_blocking=True)
            if done == a.warmup:
                torch.cuda.synchronize()
                start = time.time()
            elif done > a.warmup:
                waited += time.time() - t_wait
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            done += 1
            if done > a.warmup:
                timed_images += a.batch
            if done >= a.warmup + a.steps:
                break
            t_wait = time.time()
    torch.cuda.synchronize()
    seconds = time.time() - start
    print(json.dumps({"system": f"pytorch-{torch.__version__}", "mode": "amp-fp16-cl-imagefolder", "batch": a.batch,
                      "workers": a.workers, "images": len(data), "img_per_s": round((timed_images - a.batch) / seconds, 1),
                      "data_wait_share": round(waited / seconds, 3), "gpu": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
