#!/usr/bin/env python3
"""Which torchvision classifiers Castor takes, measured: each model is exported as a user would
(torch.onnx.export, dynamo=False, opset 17) in training mode, and in eval mode, then

  - imports: `castor import` accepts it (else the first error, which names the node and op);
  - forward: `castor-run infer` on the CPU backend against onnxruntime on the same weights and
    input (test/reference/compare_onnxruntime.py: relative error of the logits, tolerance 1e-4);
  - trains: `castor compile --train` (AdamW, lr 1e-3 or --lr) and 6 steps of `castor-run train` on one
    fixed batch of 2 random images on the CPU backend; it trains when every loss is finite and the
    last is below the first.

Runs where torch, torchvision and onnxruntime are installed (not Castor's dependencies); the
weights are torchvision's random initialisation (weights=None, torch.manual_seed(0)). Writes a
Markdown table to --out and prints it.

    python3 scripts/model_coverage.py --bin build/bin --work /tmp/coverage --out docs/model_coverage_table.md

With --exports DIR it checks models exported elsewhere instead (scripts/export_model_zoo.py on
a machine with torch and timm: graph-only training exports and DIR/exports.jsonl): each model's
weights are filled with seeded values (test/reference/compare_onnxruntime.py's rule), then the
same checks run at the model's own input size, 3 training steps. No torch needed.

    python3 scripts/model_coverage.py --bin build/bin --exports DIR --work /tmp/timm --out docs/models_timm.md
"""

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import warnings

import numpy as np

MODELS = ["resnet18", "resnet50", "resnet101", "resnext50_32x4d", "wide_resnet50_2", "vgg11_bn", "densenet121",
          "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "regnet_y_400mf",
          "shufflenet_v2_x1_0", "squeezenet1_1", "convnext_tiny", "vit_b_16", "swin_t"]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def export(name, mode, path):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    model.train(mode == "train")
    x = torch.randn(2, 3, 224, 224)
    training = torch.onnx.TrainingMode.TRAINING if mode == "train" else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, training=training,
                          do_constant_folding=mode != "train", input_names=["input"], output_names=["output"])


def first_error(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()[:160]
    return text.strip().splitlines()[-1][:160] if text.strip() else "failed"


def run(cmd, timeout=1800):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def filled(exported, path):
    """The graph-only export with seeded weights, saved whole at `path`."""
    import onnx
    sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
    from compare_onnxruntime import fill_weights
    model = onnx.load(exported, load_external_data=False)
    fill_weights(model, np.random.default_rng(0))
    onnx.save(model, path)


def check(name, mode, args, exported=None, size=224, steps=6):
    import onnx
    work = os.path.join(args.work, f"{name}_{mode}")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    row = {"model": name, "export": mode}
    try:
        if exported:
            filled(exported, path)
        else:
            export(name, mode, path)
    except Exception as e:  # an export failure is a row too
        row["imports"] = f"export failed: {str(e).splitlines()[0][:120]}"
        return row
    ops = collections.Counter(n.op_type for n in onnx.load(path, load_external_data=False).graph.node)
    row["ops"] = len(ops)
    code, out = run([os.path.join(args.bin, "castor"), "import", path, "--batch", "2", "-o", os.path.join(work, "m.mlir")])
    if code != 0:
        unsupported = sorted({l.split("op type '")[1].split("'")[0] for l in out.splitlines() if "op type '" in l})
        row["imports"] = "no: " + (", ".join(unsupported) + " unsupported" if unsupported else first_error(out))
        return row
    row["imports"] = "yes"
    code, out = run([sys.executable, os.path.join(ROOT, "test", "reference", "compare_onnxruntime.py"), path,
                     "--bin", args.bin, "--work", os.path.join(work, "ort"), "--batch", "2"])
    err = [l for l in out.splitlines() if "relative error" in l]
    row["forward"] = (err[-1].split("relative error ")[1].split(" ")[0] + (" ok" if code == 0 else " FAIL")) if err \
        else "no: " + first_error(out)
    plan = os.path.join(work, "train.plan")
    code, out = run([os.path.join(args.bin, "castor"), "compile", path, "--init", "onnx", "--batch", "2", "--train",
                     "--optimizer", "adamw", "--lr", str(args.lr), "-o", plan])
    notes = []
    for line in out.splitlines():
        if line.startswith("note: ") and "folded" in line:
            notes.append("BatchNorm folded into the convolutions by the export: not the original model")
        elif line.startswith("note: ") and "inference form" in line:
            notes.append("inference-form BatchNorm: statistics frozen")
    if code != 0:
        row["trains"] = "no: " + first_error(out)
        return row
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(0)
    np.save(os.path.join(data, "images.npy"), rng.standard_normal((2, 3, size, size)).astype(np.float32))
    np.save(os.path.join(data, "labels.npy"), rng.integers(0, 1000, 2).astype(np.int64))
    log = os.path.join(work, "train.jsonl")
    code, out = run([os.path.join(args.bin, "castor-run"), "train", plan, "--steps", str(steps), "--data", "npy:" + data,
                     "--log-json", log])
    if code != 0:
        row["trains"] = "no: " + first_error(out)
        return row
    losses = [json.loads(l)["loss"] for l in open(log)]
    ok = all(np.isfinite(losses)) and losses[-1] < losses[0]
    row["trains"] = f"{'yes' if ok else 'NO'}: {steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}" + \
        (f" ({'; '.join(notes)})" if notes else "")
    return row


def write_table(path, how, keys, rows, steps):
    """The Markdown table of `rows` at `path` (and on stdout): a line saying when, at which commit
    and `how`, then one row a model, its `keys` columns first."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"Measured {datetime.date.today()} at commit `{commit}` {how}.", "",
             f"| {keys[0]} | {keys[1]} | distinct ONNX ops | imports | forward vs onnxruntime | "
             f"trains ({steps} steps, one batch) |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[keys[0]]} | {r[keys[1]]} | {r.get('ops', '')} | {r.get('imports', '')} | "
                     f"{r.get('forward', '')} | {r.get('trains', '')} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def check_exports(args):
    """The models of scripts/export_model_zoo.py's DIR/exports.jsonl; a table with their families."""
    rows, meta = [], [json.loads(l) for l in open(os.path.join(args.exports, "exports.jsonl"))]
    wanted = set(args.models.split(",")) if args.models != ",".join(MODELS) else None
    for m in sorted(meta, key=lambda m: (m["family"], m["model"])):
        if wanted and m["model"] not in wanted:
            continue
        if m["export"] != "ok":
            row = {"model": m["model"], "export": "train", "imports": "export failed: " + m["export"][8:]}
        else:
            size = m.get("input_size", [3, 224, 224])
            if size[1] != size[2]:
                row = {"model": m["model"], "export": "train", "imports": f"input {size} not square: not checked"}
            else:
                row = check(m["model"], "train", args, exported=os.path.join(args.exports, m["model"] + ".onnx"),
                            size=size[1], steps=3)
        row["family"] = m["family"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    ok = [r for r in rows if r.get("imports") == "yes" and str(r.get("trains", "")).startswith("yes")]
    versions = next((f"torch {m['torch']}, timm {m['timm']}" for m in meta if "timm" in m), "")
    write_table(args.out, f"exported with {versions} (`scripts/export_model_zoo.py`, `scripts/model_coverage.py "
                f"--exports`; CPU backend, batch 2, seeded weights): **{len(ok)} of {len(rows)} import and train** "
                f"({len({r['family'] for r in rows})} families)", ("family", "model"), rows, 3)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default="train,eval")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--exports", help="graph-only exports of scripts/export_model_zoo.py (no torch needed)")
    args = ap.parse_args()
    if args.exports:
        return check_exports(args)
    import torch
    import torchvision
    rows = []
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            row = check(name, mode, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_table(args.out, f"with torch {torch.__version__}, torchvision {torchvision.__version__} "
                f"(`scripts/model_coverage.py`; CPU backend, batch 2, 224x224)", ("model", "export"), rows, 6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
