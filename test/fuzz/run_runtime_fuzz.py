"""Makes the runtime fuzzer's seeds (a small model's training and forward plans from `castor
compile`, its weights and a training state, the image fixtures), then fuzzes each reader.

  run_runtime_fuzz.py --fuzzer BIN --iterations N --bin BUILD/bin --models MODELS --images DIR --work DIR
                      [--targets plan safetensors image] [--messages-dir DIR]
"""
import argparse
import glob
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    for a in ("--fuzzer", "--iterations", "--bin", "--models", "--images", "--work"):
        ap.add_argument(a, required=True)
    ap.add_argument("--targets", nargs="*", default=["plan", "safetensors", "image", "tuning-cache"])
    ap.add_argument("--messages-dir")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = args.work
    model = os.path.join(w, "tiny.onnx")
    subprocess.run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", "tiny", "--image-size", "16",
                    "-o", model], check=True, stdout=subprocess.DEVNULL)
    castor, castor_run = os.path.join(args.bin, "castor"), os.path.join(args.bin, "castor-run")
    plans = []
    for name, extra in (("train_fp16", ["--train", "--precision", "fp16", "--optimizer", "adamw"]),
                        ("train_sgd", ["--train", "--optimizer", "sgd", "--momentum", "0.9"]),
                        ("forward", [])):
        plan = os.path.join(w, name + ".plan")
        subprocess.run([castor, "compile", model, "--batch", "2", "-o", plan] + extra, check=True,
                       stderr=subprocess.DEVNULL)
        plans.append(plan)
    state = os.path.join(w, "state.safetensors")
    subprocess.run([castor_run, "train", plans[0], "--steps", "1", "--save", state], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cache = os.path.join(w, "tuning.txt")
    with open(cache, "w") as f:  # the format the CUDA backend writes (cuda/tuning/tuning_cache.h)
        f.write("# castor tuning cache\n"
                "conv2d|fwd|f16|nhwc|256x64x56x56|64x64x3x3|p1,1|s1,1|d1,1|g1\tgraph:eng12\t0.0871\n"
                "conv2d|dgrad|f16|nhwc|256x256x14x14|256x256x3x3|p1,1|s1,1|d1,1|g1\tgraph:eng7\t0.1204\n"
                "batch_norm|f16|nhwc|256x64x112x112\tex\t0.233\n")
    seeds = {
        "tuning-cache": [cache],
        "plan": plans,
        "safetensors": [state] + glob.glob(os.path.join(w, "*.weights.safetensors")),
        "image": sorted(p for p in glob.glob(os.path.join(args.images, "*")) if p.endswith((".jpg", ".png"))),
    }
    failed = False
    for target in args.targets:
        cmd = [args.fuzzer, target, args.iterations] + seeds[target]
        if args.messages_dir:
            os.makedirs(args.messages_dir, exist_ok=True)
            cmd += ["--messages", os.path.join(args.messages_dir, target + ".txt")]
        failed |= subprocess.run(cmd).returncode != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
