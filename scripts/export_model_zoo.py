#!/usr/bin/env python3
"""Exports a zoo of image classifiers to ONNX as a user would for training (torch.onnx.export,
TorchScript exporter, training mode, opset 17, no constant folding), graph only: every floating-
point initializer of more than 64 elements becomes external data whose file is not written (its
dims and type kept), so that hundreds of models fit in a few megabytes; integer initializers
(index tables, shapes) stay inline. scripts/model_coverage.py fills the weights with seeded values
and checks each model. Runs where torch and timm are installed (the GPU machine).

    python3 scripts/export_model_zoo.py --zoo timm --out DIR [--models a,b] [--jobs 8]

DIR/<model>.onnx, and DIR/exports.jsonl: one line a model (its family, input size, export status,
seconds, the versions).
"""
import argparse
import json
import multiprocessing
import os
import sys
import time
import warnings

# (family, timm model name): at least 25 families, as issue "Model coverage beyond torchvision" lists them.
TIMM = [
    ("resnet", "resnet18"), ("resnet", "resnet50"), ("resnet-d", "resnet26d"), ("resnet-d", "resnet50d"),
    ("seresnext", "seresnext26d_32x4d"), ("seresnext", "seresnext50_32x4d"),
    ("ecaresnet", "ecaresnet26t"), ("ecaresnet", "ecaresnet50t"),
    ("res2net", "res2net50_26w_4s"), ("res2net", "res2next50"),
    ("resnest", "resnest14d"), ("resnest", "resnest26d"),
    ("efficientnet", "efficientnet_b0"), ("efficientnet", "efficientnet_b2"), ("efficientnet", "tf_efficientnet_b0"),
    ("mobilenetv3", "mobilenetv3_large_100"), ("mobilenetv3", "mobilenetv3_small_100"),
    ("mobilenetv2", "mobilenetv2_100"), ("mnasnet", "mnasnet_100"), ("fbnet", "fbnetc_100"),
    ("ghostnet", "ghostnet_100"), ("rexnet", "rexnet_100"), ("lcnet", "lcnet_100"), ("tinynet", "tinynet_a"),
    ("hardcorenas", "hardcorenas_a"),
    ("regnety", "regnety_016"), ("regnety", "regnety_032"), ("regnetz", "regnetz_b16"),
    ("convnext", "convnext_nano"), ("convnext", "convnext_tiny"),
    ("dla", "dla34"), ("dla", "dla46_c"),
    ("cspnet", "cspresnet50"), ("cspnet", "cspdarknet53"),
    ("repvgg", "repvgg_a2"), ("repvgg", "repvgg_b0"),
    ("hrnet", "hrnet_w18_small"),
    ("inception", "inception_v3"), ("inception", "inception_v4"),
    ("xception", "xception41"), ("xception", "xception65"),
    ("dpn", "dpn68"), ("densenet", "densenet121"), ("vgg", "vgg11_bn"), ("resnetv2", "resnetv2_50"),
    ("gernet", "gernet_s"), ("selecsls", "selecsls42b"),
    ("deit/vit", "deit_tiny_patch16_224"), ("deit/vit", "vit_small_patch16_224"), ("deit/vit", "vit_base_patch16_224"),
    ("swin", "swin_tiny_patch4_window7_224"),
    ("mixer", "mixer_b16_224"),
    ("efficientformer", "efficientformer_l1"),
    ("poolformer", "poolformer_s12"),
    ("mobilevit", "mobilevit_xs"), ("mobilevit", "mobilevit_s"),
    ("levit", "levit_128s"),
    ("nfnet", "nf_resnet50"), ("nfnet", "dm_nfnet_f0"),
    ("coatnet", "coatnet_0_rw_224"), ("maxvit", "maxvit_tiny_rw_224"), ("edgenext", "edgenext_small"),
]
FLOAT_TYPES = {1, 10, 11, 16}  # float, float16, double, bfloat16


def strip_weights(path):
    """Floating-point initializers above 64 elements become external data that is not written."""
    import onnx
    model = onnx.load(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    offset = 0
    for t in model.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type not in FLOAT_TYPES or n <= 64:
            continue
        size = len(t.raw_data) if t.HasField("raw_data") else n * {1: 4, 10: 2, 11: 8, 16: 2}[t.data_type]
        for field in ("raw_data", "float_data", "double_data", "int32_data"):
            t.ClearField(field)
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", stem + ".weights.bin"), ("offset", str(offset)), ("length", str(size))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        offset += size
    onnx.save(model, path)


def export_one(job):
    family, name, out = job
    import timm
    import torch
    torch.set_num_threads(2)  # several exports at once
    row = {"model": name, "family": family, "torch": torch.__version__, "timm": timm.__version__}
    start = time.time()
    try:
        torch.manual_seed(0)
        model = timm.create_model(name, pretrained=False)
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))
        row["input_size"] = list(size)
        model.train()
        path = os.path.join(out, name + ".onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.randn(2, *size),), path, dynamo=False, opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        strip_weights(path)
        row["export"] = "ok"
    except Exception as e:  # an export failure is a row too
        row["export"] = "failed: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    row["seconds"] = round(time.time() - start, 1)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", choices=["timm"], default="timm")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", help="comma-separated names (default: the whole zoo)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    zoo = TIMM if not args.models else [(f, n) for f, n in TIMM if n in args.models.split(",")] + \
        [("other", n) for n in args.models.split(",") if n not in {m for _, m in TIMM}]
    jobs = [(family, name, args.out) for family, name in zoo]
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool, \
            open(os.path.join(args.out, "exports.jsonl"), "w") as log:
        for row in pool.imap_unordered(export_one, jobs):
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
