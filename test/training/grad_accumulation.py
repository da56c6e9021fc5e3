"""Gradient accumulation: one step over k micro-batches of N equals one step over a batch of
k*N when the model has no batch statistics (an MLP): the mean loss and its gradient are the
same, only the order of the sums differs.

Usage: grad_accumulation.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_runs import MlpRuns  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    runs = MlpRuns(args.bin, args.models, args.work, ["--optimizer", "sgd", "--lr", "0.5", "--momentum", "0.9"], seed=5)
    whole = runs.train("whole", 3, ["--batch", "12"])
    parts = runs.train("accumulated", 3, ["--batch", "4", "--accumulate", "3"])
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
