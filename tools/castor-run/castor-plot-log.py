#!/usr/bin/env python3
"""Training curves from `castor-run train --log-json LOG.jsonl`, for a quick look without
TensorBoard: loss, batch accuracy, throughput and (with loss scaling) the loss scale against the
step, one panel each, drawn with matplotlib.

Usage: castor-plot-log.py LOG.jsonl [LOG2.jsonl ...] -o curves.png
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [("loss", "loss", False), ("accuracy", "batch accuracy", False), ("img_per_s", "img/s", False),
          ("loss_scale", "loss scale", True)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    runs = []
    for path in a.logs:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        if not rows:
            raise SystemExit(f"{path}: no steps logged")
        runs.append((os.path.basename(path), rows))
    panels = [p for p in PANELS if any(p[0] in r for _, rows in runs for r in rows)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.6 * len(panels)), sharex=True, squeeze=False)
    for ax, (key, label, log) in zip(axes[:, 0], panels):
        for name, rows in runs:
            pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), label=name, linewidth=1)
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log", base=2)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)


if __name__ == "__main__":
    main()
