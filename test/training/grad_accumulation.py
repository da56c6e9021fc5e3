"""Gradient accumulation: one step over k micro-batches of N equals one step over a batch of
k*N when the model has no batch statistics (an MLP): the mean loss and its gradient are the
same, only the order of the sums differs. In fp32 to 1e-5; in fp16 with dynamic loss scaling
(each micro-batch's loss gradient seeded with the scale times 1/k, as GradScaler scales loss/k)
to 2e-3, four units of fp16's rounding (2^-11): the micro-batches' gradients are rounded to fp16
apart before they are summed. Neither run may skip a step.

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
    failed = False
    for precision, tolerance in (("fp32", 1e-5), ("fp16", 2e-3)):
        runs = MlpRuns(args.bin, args.models, os.path.join(args.work, precision),
                       ["--optimizer", "sgd", "--lr", "0.5", "--momentum", "0.9", "--precision", precision], seed=5)
        whole = runs.train("whole", 3, ["--batch", "12"])
        parts = runs.train("accumulated", 3, ["--batch", "4", "--accumulate", "3"])
        worst = 0.0
        # Constants (the loss gradient's seed: 1 here, 1/3 there) are saved with the state too.
        compared = [n for n in whole if not n.startswith("castor.constant")]
        for name in compared:
            value = whole[name]
            a, b = value.astype(np.float64), parts[name].astype(np.float64)
            worst = max(worst, float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30)))
        skipped = int(parts["castor.skipped_steps"]) + int(whole["castor.skipped_steps"])
        scaled = precision != "fp16" or "castor.loss_scale" in parts
        ok = worst <= tolerance and skipped == 0 and scaled
        failed |= not ok
        print(f"{precision}: 3 SGD steps, batch 12 vs 3 micro-batches of 4, {len(compared)} state tensors: worst "
              f"relative difference {worst:.2e} (tolerance {tolerance:g}), {skipped} steps skipped"
              + ("" if scaled else ", no loss scale") + f": {'ok' if ok else 'FAILED'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
