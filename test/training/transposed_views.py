"""ConvNeXt's permutes as views train exactly as the transposes they replace, on the CPU reference.

gradcheck's convnext model (a stem conv and its LayerNorm2d; a block of 7x7 depthwise conv,
permute, LayerNorm, Linear, GELU, Linear, permute back, layer scale, residual add) in float32 is
compiled with and without --transposed-views and trained for N AdamW steps on synthetic data in
fp32, fp16 and bf16: every state tensor (parameters, moments, loss scaler) must be bit-identical.
The plan with views must make every one of the step's eight permutes (four forward, four in the
backward) a view of its operand's bytes (castor-plan-views), the other none, so the comparison
cannot pass vacuously; the CPU reference then stores the views' [N,C,H,W] sides channels-last as
the CUDA backend does.

Usage: transposed_views.py --bin BUILD/bin --work DIR [--steps N]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gradcheck"))
sys.path.insert(0, os.path.join(HERE, "..", "cuda"))
sys.path.insert(0, HERE)
import gradcheck  # noqa: E402
from make_tiny_transformer import to_float32  # noqa: E402
from mlp_runs import read_state  # noqa: E402

PERMUTES = 8


def transposed_views(bin_dir, plan):
    """The plan's transposes whose result is a view of their operand."""
    out = subprocess.run([os.path.join(bin_dir, "castor-run"), "inspect", "--json", plan], check=True,
                         capture_output=True, text=True).stdout
    p = json.loads(out)["plan"]
    views = {t["id"] for t in p["tensors"] if "view_of" in t}
    return sum(k["op"] == "transpose" and k["outputs"][0] in views for k in p["kernels"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "convnext.onnx")
    onnx.save(to_float32(gradcheck.convnext(np.random.default_rng(20261207))), model)
    failures = 0
    for precision in ("fp32", "fp16", "bf16"):
        states, views = {}, {}
        for flag in ("true", "false"):
            plan = os.path.join(args.work, f"{precision}_{flag}.plan")
            state = os.path.join(args.work, f"{precision}_{flag}.safetensors")
            subprocess.run([os.path.join(args.bin, "castor"), "compile", model, "--init", "kaiming", "--batch", "2",
                            "--train", "--precision", precision, "--optimizer", "adamw", "--lr", "1e-2",
                            f"--transposed-views={flag}", "-o", plan], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            views[flag] = transposed_views(args.bin, plan)
            subprocess.run([os.path.join(args.bin, "castor-run"), "train", plan, "--device", "cpu", "--steps",
                            str(args.steps), "--data", "synthetic", "--seed", "7", "--save", state], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            states[flag] = read_state(state)
        a, b = states["true"], states["false"]
        differing = sorted(n for n in set(a) | set(b) if n not in a or n not in b or a[n].tobytes() != b[n].tobytes())
        finite = all(np.all(np.isfinite(v.astype(np.float64))) for v in a.values() if v.dtype != np.uint16)
        ok = views["true"] == PERMUTES and views["false"] == 0 and not differing and finite
        failures += not ok
        print(f"{precision}: {views['true']} of {PERMUTES} permutes are views ({views['false']} without), "
              f"{args.steps} steps, {len(a)} state tensors, {len(differing)} differ"
              f"{'' if finite else ', non-finite state'}: {'ok' if ok else 'FAILED'}"
              + (f" ({', '.join(differing[:5])})" if differing else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
