"""Gradient accumulation: one step over k micro-batches of N equals one step over a batch of
k*N when the model has no batch statistics (an MLP): the mean loss and its gradient are the
same, only the order of the sums differs.

Usage: grad_accumulation.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loss_scaling import read_state  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "mlp.onnx")
    subprocess.run([sys.executable, os.path.join(args.models, "mlp.py"), "--hidden", "32", "--weights", "none", "-o",
                    model], check=True, stdout=subprocess.DEVNULL)

    def train(name, flags):
        plan, state = os.path.join(args.work, name + ".plan"), os.path.join(args.work, name + ".safetensors")
        subprocess.run([os.path.join(args.bin, "castor"), "compile", model, "--init", "kaiming", "--train",
                        "--optimizer", "sgd", "--lr", "0.5", "--momentum", "0.9", "-o", plan] + flags,
                       check=True, stderr=subprocess.DEVNULL)
        subprocess.run([os.path.join(args.bin, "castor-run"), "train", plan, "--steps", "3", "--data", "synthetic",
                        "--seed", "5", "--save", state], check=True, stdout=subprocess.DEVNULL)
        return read_state(state)

    whole = train("whole", ["--batch", "12"])
    parts = train("accumulated", ["--batch", "4", "--accumulate", "3"])
    worst = 0.0
    # Constants (the loss gradient's seed: 1 here, 1/3 there) are saved with the state too.
    compared = [n for n in whole if not n.startswith("castor.constant")]
    for name in compared:
        value = whole[name]
        a, b = value.astype(np.float64), parts[name].astype(np.float64)
        worst = max(worst, float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30)))
    ok = worst <= 1e-5
    print(f"3 SGD steps, batch 12 vs 3 micro-batches of 4, {len(compared)} state tensors: worst relative "
          f"difference {worst:.2e} "
          f"(tolerance 1e-5): {'ok' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
