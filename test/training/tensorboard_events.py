"""`castor-run train --tensorboard DIR` writes an event file that TensorBoard's own reader
(`tensorboard.backend.event_processing.event_file_loader`, PyPI tensorboard) reads back with
the values of `--log-json` (as float32, TensorBoard's scalar type, within the one float32 ulp that
the log's 9 printed digits leave): loss, accuracy,
img/s, epoch, the loss scaler's values and, every --grad-stats steps, the gradient statistics.
Also draws the same log with castor-plot-log.py.

Usage: tensorboard_events.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model, plan = os.path.join(a.work, "mlp.onnx"), os.path.join(a.work, "mlp.plan")
    log, tb = os.path.join(a.work, "log.jsonl"), os.path.join(a.work, "tb")
    for old in glob.glob(os.path.join(tb, "events.out.tfevents.*")):
        os.remove(old)
    run([sys.executable, os.path.join(a.models, "mlp.py"), "--hidden", "16", "--weights", "none", "-o", model])
    run([os.path.join(a.bin, "castor"), "compile", model, "--init", "kaiming", "--train", "--batch", "8",
         "--precision", "fp16", "--grad-stats", "-o", plan])
    steps = 6
    run([os.path.join(a.bin, "castor-run"), "train", plan, "--steps", str(steps), "--data", "synthetic",
         "--log-json", log, "--tensorboard", tb, "--grad-stats", "2"])
    with open(log) as f:
        lines = [json.loads(line) for line in f]
    files = glob.glob(os.path.join(tb, "events.out.tfevents.*"))
    assert len(files) == 1, files
    events = list(EventFileLoader(files[0]).Load())
    problems = []
    if events[0].file_version != "brain.Event:2":
        problems.append(f"first record is not the file version: {events[0]}")
    # The loader TensorBoard itself uses, which turns scalar summaries into tensors as it reads.
    def value_of(v):
        return tensor_util.make_ndarray(v.tensor).item() if v.HasField("tensor") else v.simple_value

    by_step = {e.step: {v.tag: value_of(v) for v in e.summary.value} for e in events[1:]}
    if sorted(by_step) != [r["step"] for r in lines]:
        problems.append(f"steps {sorted(by_step)} against the log's {[r['step'] for r in lines]}")
    compared = 0
    for r in lines:
        got = by_step.get(r["step"], {})
        want = {"train/loss": r["loss"], "train/accuracy": r["accuracy"], "train/img_per_s": r["img_per_s"],
                "train/epoch": r["epoch"]}
        for key in ("loss_scale", "steps_since_overflow", "skipped_steps"):
            if key in r:
                want["train/" + key] = r[key]
        for param, (mean_abs, max_abs, non_finite) in r.get("grad_stats", {}).items():
            want["grad_mean_abs/" + param] = mean_abs
            want["grad_max_abs/" + param] = max_abs
            want["grad_non_finite/" + param] = non_finite
        for tag, value in want.items():
            compared += 1
            # The log prints 9 significant digits, the event holds a float32: one float32 ulp apart
            # at most (when the 9 digits round across a float32 midpoint).
            w = np.float32(value)
            if tag not in got or abs(np.float32(got[tag]) - w) > np.spacing(w):
                problems.append(f"step {r['step']} {tag}: event {got.get(tag)}, log {value}")
    if not any("grad_stats" in r for r in lines) or not any("loss_scale" in r for r in lines):
        problems.append("the log has no gradient statistics or loss scale: the comparison would be vacuous")
    png = os.path.join(a.work, "curves.png")
    run([sys.executable, os.path.join(a.bin, "castor-plot-log.py"), log, "-o", png])
    with open(png, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            problems.append("castor-plot-log.py wrote no PNG")
    print(f"{len(events) - 1} events, {compared} values compared with the log: "
          + ("ok" if not problems else "FAILED\n  " + "\n  ".join(problems[:10])))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
