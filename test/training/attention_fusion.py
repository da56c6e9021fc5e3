"""A mixed-precision step with fused attention (castor-fuse-attention: one `attention` kernel
and its backward) trains as the unfused matmul-softmax-matmul chain does, on the CPU reference.

The two are not bit-identical: the fused kernel keeps the scores and probabilities in f32 where
the chain rounds them to f16 or bf16. So both are measured against the same model's f32 step:
over N AdamW steps, the fused step's largest loss deviation from f32 must be within twice the
unfused step's (plus 1e-4 for runs where the chain is all but exact). A wrong scale, a dropped
gradient or a transposed operand moves the loss by far more than rounding does. The test also
checks that `--fuse auto` fused every attention and `--fuse none` none, and that the first
step's loss is f32's within 1e-3 (one seed, one set of initial weights, whatever the precision).

Usage: attention_fusion.py --bin BUILD/bin --work DIR
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 30


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kernel_count(bin_dir, plan, op):
    out = subprocess.run([os.path.join(bin_dir, "castor-run"), "inspect", "--json", plan], check=True,
                         capture_output=True, text=True).stdout
    return sum(k["op"] == op for k in json.loads(out)["plan"]["kernels"])


def write_data(work):
    """Eight fixed images with fixed labels, wrapping around: the step can fit them, so the loss
    falls and the comparison is over a trajectory, not noise."""
    rng = np.random.default_rng(11)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "images.npy"), rng.standard_normal((8, 3, 4, 4)).astype(np.float32))
    np.save(os.path.join(data, "labels.npy"), rng.integers(0, 3, 8).astype(np.int64))
    return "npy:" + data


def losses(bin_dir, model, work, data, name, precision, fuse):
    plan = os.path.join(work, f"{name}.plan")
    log = os.path.join(work, f"{name}.jsonl")
    # A static loss scale: no step skipped while a dynamic scale finds its level.
    scale = ["--loss-scale", "static:1024"] if precision == "fp16" else []
    run([os.path.join(bin_dir, "castor"), "compile", model, "--init", "kaiming", "--train", "--precision", precision,
         "--optimizer", "adamw", "--lr", "1e-3", "--fuse", fuse, "-o", plan] + scale)
    if os.path.exists(log):
        os.remove(log)
    run([os.path.join(bin_dir, "castor-run"), "train", plan, "--device", "cpu", "--steps", str(STEPS), "--data",
         data, "--seed", "5", "--log-json", log])
    with open(log) as f:
        values = [json.loads(line)["loss"] for line in f if line.strip()]
    if len(values) != STEPS:
        sys.exit(f"{name}: {len(values)} logged steps, expected {STEPS}")
    return plan, values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "tiny_attention.onnx")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "cuda", "make_tiny_transformer.py"), model, "--dim", "32"],
                   check=True)
    data = write_data(args.work)
    _, reference = losses(args.bin, model, args.work, data, "fp32", "fp32", "auto")
    failures = 0
    for precision in ("fp16", "bf16"):
        fused_plan, fused = losses(args.bin, model, args.work, data, f"{precision}_fused", precision, "auto")
        plain_plan, plain = losses(args.bin, model, args.work, data, f"{precision}_unfused", precision, "none")
        n_fused = (kernel_count(args.bin, fused_plan, "attention"), kernel_count(args.bin, fused_plan, "attention_backward"))
        n_plain = kernel_count(args.bin, plain_plan, "attention")
        dev_fused = max(abs(a - r) for a, r in zip(fused, reference))
        dev_plain = max(abs(a - r) for a, r in zip(plain, reference))
        bound = 2 * dev_plain + 1e-4
        same_start = abs(fused[0] - reference[0]) < 1e-3 and abs(plain[0] - reference[0]) < 1e-3
        ok = (n_fused == (1, 1) and n_plain == 0 and dev_fused <= bound and reference[-1] < 0.5 * reference[0]
              and same_start)
        failures += not ok
        print(f"{precision}: attention kernels fused {n_fused} (unfused plan: {n_plain}); loss {reference[0]:.4f} -> "
              f"{reference[-1]:.4f} in f32; largest deviation from f32 over {STEPS} steps: fused {dev_fused:.2e}, "
              f"unfused {dev_plain:.2e} (bound {bound:.2e}); first step {fused[0]:.5f} / {plain[0]:.5f} / f32 "
              f"{reference[0]:.5f}: {'ok' if ok else 'FAILED'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
