"""Training from an image folder: Fashion-MNIST written as a folder of PNGs
(scripts/make_image_folder.py, true labels) trains a small ResNet through `--data folder:DIR`
to the accuracy the IDX path reaches on the same images, and evaluation agrees across paths:

- folder-trained and IDX-trained models (same plan, steps and seed; each source shuffles its own
  way) reach test accuracies within --tolerance of each other, both above --threshold;
- `castor-run eval` on the test folder equals `castor-run eval` on the IDX test files (the same
  pixels), for the same weights (the folder-trained ones: once, since any weights see the same pixels);
- the validation `castor-run train --val-data` logs after the last step equals `castor-run eval`
  of the state it saved (the folder-trained run's).

`--augment none`: 28x28 images pass unchanged, so the two paths feed the same pixels.

Usage: image_folder.py --bin BUILD/bin --models MODELS_DIR --scripts SCRIPTS_DIR --data DIR --work DIR
"""
import argparse
import json
import os
import subprocess
import sys


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def evaluate(args, plan, state, data):
    out = run([os.path.join(args.bin, "castor-run"), "eval", plan, "--weights", state, "--data", data, "--augment",
               "none", "--json"], stdout=subprocess.PIPE).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    for a in ("--bin", "--models", "--scripts", "--data", "--work"):
        ap.add_argument(a, required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threshold", type=float, default=0.70)
    ap.add_argument("--tolerance", type=float, default=0.03)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    castor, castor_run = os.path.join(args.bin, "castor"), os.path.join(args.bin, "castor-run")
    folders = {}
    for split in ("train", "t10k"):
        folders[split] = os.path.join(args.work, split)
        if not os.path.isdir(folders[split]):
            run([sys.executable, os.path.join(args.scripts, "make_image_folder.py"), "--kind", "fashion-mnist",
                 "--source", args.data, "--split", split, "--out", folders[split]], stdout=subprocess.DEVNULL)
    model = os.path.join(args.work, "small_resnet.onnx")
    run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", "tiny", "--weights", "none", "-o", model],
        stdout=subprocess.DEVNULL)
    plan, eval_plan = os.path.join(args.work, "train.plan"), os.path.join(args.work, "eval.plan")
    run([castor, "compile", model, "--init", "kaiming", "--seed", "0", "--batch", "64", "--train", "--optimizer", "sgd",
         "--lr", "0.1", "--momentum", "0.9", "--weight-decay", "5e-4", "--no-decay-bn-bias", "--schedule", "cosine",
         "--total-steps", str(args.steps), "-o", plan], stderr=subprocess.DEVNULL)
    run([castor, "compile", model, "--init", "kaiming", "--batch", "500", "--eval", "-o", eval_plan],
        stderr=subprocess.DEVNULL)
    ok = True
    accuracy = {}
    for name, data in (("idx", "idx:" + args.data), ("folder", "folder:" + folders["train"])):
        state, log = os.path.join(args.work, name + ".safetensors"), os.path.join(args.work, name + ".jsonl")
        validate = name == "folder"
        run([castor_run, "train", plan, "--steps", str(args.steps), "--data", data, "--augment", "none", "--seed", "0",
             "--log-json", log, "--save", state]
            + (["--val-plan", eval_plan, "--val-data", "folder:" + folders["t10k"]] if validate else []),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        on_idx = evaluate(args, eval_plan, state, "idx:" + args.data)
        accuracy[name] = on_idx["accuracy"]
        ok &= on_idx["accuracy"] >= args.threshold
        if not validate:
            print(f"{name}: test accuracy {on_idx['accuracy']:.4f} on IDX, top-5 {on_idx['top5']:.4f}", flush=True)
            continue
        on_folder = evaluate(args, eval_plan, state, "folder:" + folders["t10k"])
        with open(log) as f:
            logged = [json.loads(line) for line in f if "val_top1" in line][-1]
        same = on_idx["correct"] == on_folder["correct"] and on_idx["count"] == on_folder["count"]
        logged_same = abs(logged["val_top1"] - on_folder["accuracy"]) < 1e-12 and logged["step"] == args.steps
        print(f"{name}: test accuracy {on_idx['accuracy']:.4f} on IDX, {on_folder['accuracy']:.4f} on the folder "
              f"({'equal' if same else 'DIFFERENT'}); logged validation {logged['val_top1']:.4f} "
              f"({'equal' if logged_same else 'DIFFERENT'}), top-5 {on_folder['top5']:.4f}", flush=True)
        ok &= same and logged_same
    gap = abs(accuracy["folder"] - accuracy["idx"])
    print(f"folder - idx: {accuracy['folder'] - accuracy['idx']:+.4f} (tolerance {args.tolerance})", flush=True)
    ok &= gap <= args.tolerance
    print("ok" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
