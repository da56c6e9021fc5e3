"""Dynamic loss scaling and clipping on the CPU reference backend, through compiled plans.

1. A planted overflow (an initial scale of 1e30 makes the fp16 gradients infinite) skips the
   step: parameters, optimizer moments and the optimizer's step count stay bit-identical, the
   scale halves, the skipped-step count is 1 and the iteration counter still advances.
2. Growth: with --loss-scale-interval 3 and an initial scale of 1, three clean steps double it.
3. Clipping happens on unscaled gradients: an fp32 plan with a static power-of-two scale and
   --clip-grad-norm gives bit-identical weights to the same plan without scaling.

Usage: loss_scaling.py --bin BUILD/bin --models MODELS_DIR --work DIR
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
    r = MlpRuns(args.bin, args.models, args.work, ["--batch", "8", "--optimizer", "adamw", "--lr", "0.01"], seed=3)
    failures = []

    def expect(ok, what):
        print(("ok      " if ok else "FAILED  ") + what)
        if not ok:
            failures.append(what)

    # 1. Planted overflow.
    before = r.train("initial", 0, ["--precision", "fp16"])
    # Its one step is skipped on purpose: a run whose every step is skipped otherwise ends non-zero.
    after = r.train("overflow", 1, ["--precision", "fp16", "--loss-scale-init", "1e30"], ["--max-skipped-steps", "2"])
    owned = [k for k in before if not k.startswith("castor.") or k == "castor.optimizer_step"]
    expect(all(before[k].tobytes() == after[k].tobytes() for k in owned),
           f"overflow: {len(owned)} parameters, moments and the step count are bit-identical")
    halved = float(np.float32(1e30) * np.float32(0.5))
    expect(float(after["castor.loss_scale"]) == halved,
           f"overflow: the scale halves (1e30 -> {float(after['castor.loss_scale']):.6g})")
    expect(int(after["castor.skipped_steps"]) == 1 and int(after["castor.loss_scale_growth_tracker"]) == 0,
           "overflow: one skipped step, growth tracker reset")
    expect(int(after["castor.iteration"]) == 1, "overflow: the iteration counter advances")

    # 2. Growth after the interval.
    grown = r.train("growth", 3, ["--precision", "fp16", "--loss-scale-init", "1", "--loss-scale-interval", "3"])
    expect(float(grown["castor.loss_scale"]) == 2.0 and int(grown["castor.loss_scale_growth_tracker"]) == 0 and
           int(grown["castor.optimizer_step"]) == 3, "growth: 3 clean steps at interval 3 double the scale")

    # 3. Clipping sees unscaled gradients.
    plain = r.train("clip_plain", 2, ["--clip-grad-norm", "0.05"])
    scaled = r.train("clip_scaled", 2, ["--clip-grad-norm", "0.05", "--loss-scale", "static:1024"])
    params = [k for k in plain if not k.startswith("castor.")]
    expect(all(plain[k].tobytes() == scaled[k].tobytes() for k in params),
           "clipping: a static power-of-two scale leaves the clipped fp32 training bit-identical")
    unclipped = r.train("clip_off", 2, [])
    expect(any(plain[k].tobytes() != unclipped[k].tobytes() for k in params), "clipping: clipping changes the weights")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
