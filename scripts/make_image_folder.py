#!/usr/bin/env python3
"""Makes image-folder datasets in the ImageNet layout, DIR/<class>/<file>, for the image-folder
input pipeline (JPEG/PNG decoding and torchvision-style augmentation, runtime/data/image_*.h).

Labels follow the class folders sorted by name, as torchvision.datasets.ImageFolder assigns them.

Kinds:
  synthetic      JPEGs of ImageNet-like size whose content depends on the class (a class-specific
                 colour pair and stripe orientation and frequency, with per-image phase, jitter,
                 brightness and noise), so that a model can learn them. Deterministic for a seed:
                 image i of class k depends on (seed, k, i) only, whatever --jobs is. For a
                 validation set, run again with another --seed into another folder.
  mixed          The synthetic classes in the files a real folder mixes, chosen per image from
                 (seed, k, i): long sides from 100 to 4,000 px (most 300-800, one in ten 1,000-4,000),
                 baseline JPEGs in 4:2:0, 4:2:2 and 4:4:4, progressive JPEGs, grayscale and CMYK
                 JPEGs, JPEGs with an EXIF orientation, PNGs with alpha (--mix lists the shares).
  large          The synthetic classes as JPEGs of 1,000-2,000 px on the long side.
  fashion-mnist  The Fashion-MNIST IDX files (Debian package dataset-fashion-mnist) as 28x28
                 grayscale PNGs, in folders "0_tshirt_top" .. "9_ankle_boot" whose name order is
                 the dataset's label order.

Examples:
  scripts/make_image_folder.py --kind synthetic --out /tmp/synth/train --classes 8 --per-class 200
  scripts/make_image_folder.py --kind fashion-mnist --out /tmp/fmnist/val --split t10k --limit 2000
  scripts/make_image_folder.py --kind mixed --out /tmp/mixed --classes 1000 --per-class 10
"""

import argparse
import gzip
import math
import multiprocessing
import os
import struct
import sys
import time

import numpy as np
from PIL import Image

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # dpkg -L dataset-fashion-mnist
FASHION_MNIST_CLASSES = ["tshirt_top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
                         "ankle_boot"]


# ---------------------------------------------------------------------------------------------
# synthetic


def class_style(k, classes):
    """What makes class k recognisable: two colours, a stripe angle and a stripe period. Neighbouring
    classes differ in hue and angle at once, so no single cue is needed to tell them apart."""
    hue = k / classes
    angle = math.pi * ((k * 0.381966) % 1.0)  # golden-ratio steps spread the angles
    period = 18.0 + 14.0 * (k % 4)  # pixels

    def rgb(h):
        return np.array([0.5 + 0.5 * math.cos(2 * math.pi * (h + s)) for s in (0.0, 1 / 3, 2 / 3)])

    return rgb(hue) * 220 + 20, rgb(hue + 0.5) * 120 + 40, angle, period


def synthetic_image(seed, k, i, classes, width, height):
    rng = np.random.default_rng([seed, k, i])
    colour, background, angle, period = class_style(k, classes)
    angle += rng.normal(0, 0.08)
    period *= math.exp(rng.normal(0, 0.1))
    # Separable pieces (a row and a column), broadcast to the image: float32 throughout for speed.
    x = np.arange(width, dtype=np.float32)[None, :]
    y = np.arange(height, dtype=np.float32)[:, None]
    phase = rng.uniform(0, 2 * math.pi)
    k = np.float32(2 * math.pi / period)
    stripes = 0.5 + 0.5 * np.sin(x * np.float32(k * math.cos(angle)) + (y * np.float32(k * math.sin(angle)) + phase))
    # A soft blob somewhere, so that crops of different places differ.
    cx, cy, r = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(0.15, 0.4) * min(width, height)
    blob = np.exp(-(x - cx) ** 2 / np.float32(2 * r * r)) * np.exp(-(y - cy) ** 2 / np.float32(2 * r * r))
    mix = (stripes * (0.6 + 0.4 * blob))[..., None]
    gain = np.float32(rng.uniform(0.75, 1.15))
    image = (background.astype(np.float32) + mix * (colour - background).astype(np.float32)) * gain
    image += rng.standard_normal((height, width, 3), dtype=np.float32) * np.float32(12)
    return Image.fromarray(np.clip(image, 0, 255).astype(np.uint8))


def write_synthetic(job):
    seed, k, i, classes, width, height, quality, path = job
    synthetic_image(seed, k, i, classes, width, height).save(path, quality=quality)


def make_synthetic(args):
    digits = len(str(args.classes - 1))
    jobs = []
    for k in range(args.classes):
        folder = os.path.join(args.out, f"class_{k:0{digits}d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(args.per_class):
            jobs.append((args.seed, k, i, args.classes, args.width, args.height, args.quality,
                         os.path.join(folder, f"{i:06d}.jpg")))
    run(write_synthetic, jobs, args.jobs)
    return len(jobs)


# ---------------------------------------------------------------------------------------------
# mixed and large

# (kind, share of the files): what each file of a mixed folder is.
MIX = [("jpeg420", 0.55), ("jpeg422", 0.08), ("jpeg444", 0.07), ("progressive", 0.1), ("gray", 0.05),
       ("cmyk", 0.03), ("exif", 0.05), ("png_alpha", 0.07)]


def mixed_size(rng, large):
    """(width, height): a long side log-uniform in 1,000-2,000 px for `large`; else mostly 300-800,
    one in ten 1,000-4,000 and one in twenty 100-300; aspect ratios from 3:4 to 16:9."""
    if large:
        side = math.exp(rng.uniform(math.log(1000), math.log(2000)))
    else:
        u = rng.uniform()
        lo, hi = (100, 300) if u < 0.05 else (1000, 4000) if u < 0.15 else (300, 800)
        side = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    aspect = rng.uniform(0.75, 16 / 9)
    long_side, short_side = int(round(side)), max(16, int(round(side / aspect)))
    return (long_side, short_side) if rng.uniform() < 0.7 else (short_side, long_side)


def write_mixed(job):
    seed, k, i, classes, kind, large, quality, stem = job
    rng = np.random.default_rng([seed, k, i, 1])
    width, height = mixed_size(rng, large)
    image = synthetic_image(seed, k, i, classes, width, height)
    if kind == "png_alpha":
        alpha = Image.fromarray(np.full((height, width), 255, np.uint8) - (np.arange(width, dtype=np.uint8) % 64)[None, :])
        image.putalpha(alpha)
        image.save(stem + ".png")
        return
    options = {"quality": quality}
    if kind == "jpeg422":
        options["subsampling"] = 1
    elif kind == "jpeg444":
        options["subsampling"] = 0
    elif kind == "progressive":
        options["progressive"] = True
    elif kind == "gray":
        image = image.convert("L")
    elif kind == "cmyk":
        image = image.convert("CMYK")
    elif kind == "exif":
        exif = Image.Exif()
        exif[0x0112] = int(rng.choice([3, 6, 8]))  # rotated 180, 90 and 270 degrees
        options["exif"] = exif
    image.save(stem + ".jpg", **options)


def make_mixed(args, large):
    digits = len(str(args.classes - 1))
    kinds, shares = zip(*MIX)
    jobs = []
    for k in range(args.classes):
        folder = os.path.join(args.out, f"class_{k:0{digits}d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(args.per_class):
            kind = "jpeg420" if large else str(np.random.default_rng([args.seed, k, i, 0]).choice(kinds, p=shares))
            jobs.append((args.seed, k, i, args.classes, kind, large, args.quality, os.path.join(folder, f"{i:06d}")))
    run(write_mixed, jobs, args.jobs)
    return len(jobs)


# ---------------------------------------------------------------------------------------------
# fashion-mnist


def read_idx(path):
    """An IDX file of unsigned bytes (plain or .gz) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    rank = data[3]
    dims = struct.unpack(f">{rank}I", data[4:4 + 4 * rank])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def find_idx(source, base):
    for name in (base, base + ".gz"):
        if os.path.exists(os.path.join(source, name)):
            return os.path.join(source, name)
    sys.exit(f"no {base} or {base}.gz in {source} (install the Debian package dataset-fashion-mnist, "
             "or point --source at the IDX files)")


def write_png(job):
    pixels, path = job
    Image.fromarray(pixels, "L").save(path)


def make_fashion_mnist(args):
    images = read_idx(find_idx(args.source, f"{args.split}-images-idx3-ubyte"))
    labels = read_idx(find_idx(args.source, f"{args.split}-labels-idx1-ubyte"))
    if images.ndim != 3 or labels.shape != (images.shape[0],):
        sys.exit(f"{args.source}: images {images.shape} and labels {labels.shape} do not match")
    count = images.shape[0] if args.limit is None else min(args.limit, images.shape[0])
    folders = [os.path.join(args.out, f"{label}_{name}") for label, name in enumerate(FASHION_MNIST_CLASSES)]
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
    jobs = [(images[n], os.path.join(folders[labels[n]], f"{n:05d}.png")) for n in range(count)]
    run(write_png, jobs, args.jobs)
    return count


# ---------------------------------------------------------------------------------------------


def run(function, jobs, processes):
    if processes <= 1:
        for job in jobs:
            function(job)
        return
    with multiprocessing.Pool(processes) as pool:
        for _ in pool.imap_unordered(function, jobs, chunksize=16):
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", required=True, choices=["synthetic", "mixed", "large", "fashion-mnist"], help="what to write")
    parser.add_argument("--out", required=True, help="the dataset folder (class folders are made inside)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    synthetic = parser.add_argument_group("synthetic, mixed and large (--width and --height: synthetic only)")
    synthetic.add_argument("--classes", type=int, default=8, help="number of classes (default 8)")
    synthetic.add_argument("--per-class", type=int, default=200, help="images per class (default 200)")
    synthetic.add_argument("--width", type=int, default=500, help="image width (default 500, ImageNet-like)")
    synthetic.add_argument("--height", type=int, default=375, help="image height (default 375)")
    synthetic.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    synthetic.add_argument("--seed", type=int, default=0, help="the images are a function of it (default 0)")
    fashion = parser.add_argument_group("fashion-mnist")
    fashion.add_argument("--split", choices=["train", "t10k"], default="train",
                         help="train (60000 images) or t10k (10000) (default train)")
    fashion.add_argument("--limit", type=int, default=None, help="write only the first N images of the split")
    fashion.add_argument("--source", default=FASHION_MNIST_DIR,
                         help=f"folder of the IDX files, plain or .gz (default {FASHION_MNIST_DIR})")
    args = parser.parse_args()
    if args.kind in ("synthetic", "mixed", "large") and (args.classes < 1 or args.per_class < 1 or args.width < 1 or args.height < 1):
        parser.error("--classes, --per-class, --width and --height must be positive")

    start = time.time()
    if args.kind == "synthetic":
        count = make_synthetic(args)
    elif args.kind in ("mixed", "large"):
        count = make_mixed(args, large=args.kind == "large")
    else:
        count = make_fashion_mnist(args)
    print(f"wrote {count} images to {args.out} in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
