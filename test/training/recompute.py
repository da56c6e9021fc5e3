"""Recompute changes where values live, not what they are: plans of one model compiled with
`--recompute none`, `cheap` and `auto` (a budget that forces recomputation, convolutions
included) train bit-identically on the CPU reference, since each recomputed value is computed
again by the same kernel from the same operands. Covers fused and unfused fp16 plans, bf16, fp32
with SGD, and gradient accumulation. Each recomputing plan must have recomputed something (and
the auto plan some convolution), its planned arena must be smaller than the plan without
recompute, and the memory report (`--report`; its picture for the first case) must be written, so the comparison cannot pass
vacuously.

Usage: recompute.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_runs import read_state  # noqa: E402

ADAMW = ["--optimizer", "adamw", "--lr", "1e-3"]
# (name, resnet.py arch, image size and activation, batch, steps, compile flags, auto's budget:
# "convs" just below cheap's planned peak, which on these models only recomputing convolutions too
# meets; "between" halfway between the peaks of none and cheap). relu6: the fused batch norms take
# clip_max, and cheap must recompute their outputs too. ("torchvision", NAME, "relu6"): the
# training-mode export test/fixtures/torchvision/NAME_train.onnx (224x224) instead of a resnet.py
# model: MobileNetV2, whose ReLU6 groups follow depthwise convolutions. ResNet-18 at 64x64, batch 16:
# with its gradients cast to f32 where the optimizer reads them (castor-schedule-casts), cheap's
# peak is already the step's floor (parameters, optimizer state and gradients at the optimizer),
# so no budget below it exists; auto gets the budget between.
CASES = [
    ("tiny_fp16", ("tiny", 32), 8, 20, ["--precision", "fp16"] + ADAMW, "convs"),
    ("tiny_relu6_fp16", ("tiny", 32, "relu6"), 8, 20, ["--precision", "fp16"] + ADAMW, "convs"),
    ("tiny_fp16_nofuse", ("tiny", 32), 8, 20, ["--precision", "fp16", "--fuse", "none"] + ADAMW, "convs"),
    ("tiny_bf16_accumulate", ("tiny", 32), 4, 10, ["--precision", "bf16", "--accumulate", "2"] + ADAMW, "convs"),
    ("tiny_fp32_sgd", ("tiny", 32), 8, 10, ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"], "between"),
    ("resnet18_fp16", ("resnet18", 64), 16, 2, ["--precision", "fp16"] + ADAMW, "between"),
    # A first loss scale of 1024: from 65536 both of its steps would overflow and be skipped (a run of
    # skipped steps only, which castor-run refuses).
    ("mobilenet_v2_fp16", ("torchvision", "mobilenet_v2", "relu6"), 2, 2,
     ["--precision", "fp16", "--loss-scale-init", "1024"] + ADAMW, "convs"),
]
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "torchvision")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    castor, castor_run = os.path.join(args.bin, "castor"), os.path.join(args.bin, "castor-run")
    failures = 0
    for name, arch, batch, steps, flags, budget_kind in CASES:
        arch, size, activation = arch if len(arch) == 3 else arch + ("relu",)
        model = os.path.join(args.work, f"{arch}_{size}_{activation}.onnx")
        if arch == "torchvision":
            model = os.path.join(FIXTURES, f"{size}_train.onnx")
        elif not os.path.exists(model):
            run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", arch, "--activation", activation,
                 "--weights", "none", "--image-size", str(size), "--num-classes", "10", "-o", model])
        reports = {}
        # The report's picture (matplotlib, a second a compile) for the first case's plans alone.
        picture = name == CASES[0][0]
        compile_flags = ["--init", "kaiming", "--batch", str(batch), "--train"] + flags + (
            [] if picture else ["--report-picture=false"])
        # none, then cheap, then auto with the case's budget.
        for policy in ("none", "cheap"):
            report = os.path.join(args.work, f"{name}_{policy}_report")
            shutil.rmtree(report, ignore_errors=True)  # only this run's files count
            run([castor, "compile", model] + compile_flags + ["--recompute", policy, "--report", report,
                                                             "-o", os.path.join(args.work, f"{name}_{policy}.plan")])
            with open(os.path.join(report, "memory.json")) as f:
                reports[policy] = json.load(f)
        none_peak, cheap_peak = reports["none"]["predicted_peak_bytes"], reports["cheap"]["predicted_peak_bytes"]
        budget = cheap_peak - 1 if budget_kind == "convs" else (none_peak + cheap_peak) // 2
        report = os.path.join(args.work, f"{name}_auto_report")
        shutil.rmtree(report, ignore_errors=True)
        auto = run([castor, "compile", model] + compile_flags +
                   ["--recompute", "auto", "--memory-budget", str(budget), "--report", report,
                    "-o", os.path.join(args.work, f"{name}_auto.plan")])
        with open(os.path.join(report, "memory.json")) as f:
            reports["auto"] = json.load(f)
        states = {}
        for policy in ("none", "cheap", "auto"):
            state = os.path.join(args.work, f"{name}_{policy}.safetensors")
            run([castor_run, "train", os.path.join(args.work, f"{name}_{policy}.plan"), "--device", "cpu", "--steps",
                 str(steps), "--data", "synthetic", "--seed", "7", "--save", state])
            states[policy] = read_state(state)
        problems = []
        for policy in ("cheap", "auto"):
            r = reports[policy]
            recomputed = [s for s in r["saved"] if s["status"] == "recomputed"]
            if not recomputed:
                problems.append(f"{policy} recomputed nothing")
            # A fused group's value is named after the group's nodes ("... + /relu/Clip"), and
            # comes back as a batch_norm_apply.
            if activation == "relu6" and not any(s["op"] == "batch_norm_apply" and "Clip" in s["name"]
                                                 for s in recomputed):
                problems.append(f"{policy} recomputed no fused batch norm + ReLU6")
            if r["arena_bytes"] >= reports["none"]["arena_bytes"]:
                problems.append(f"{policy} arena {r['arena_bytes']} not below {reports['none']['arena_bytes']}")
            if os.path.exists(os.path.join(args.work, f"{name}_{policy}_report", "memory.png")) != picture:
                problems.append(f"{policy}: memory.png {'missing' if picture else 'drawn with --report-picture=false'}")
            a, b = states[policy], states["none"]
            differing = sorted(n for n in b if n not in a or a[n].tobytes() != b[n].tobytes())
            if differing:
                problems.append(f"{policy}: {len(differing)} state tensors differ ({', '.join(differing[:4])})")
        if reports["auto"]["predicted_peak_bytes"] > budget:
            problems.append(f"auto: predicted peak {reports['auto']['predicted_peak_bytes']} over the budget {budget}")
        convs = any(s["op"] == "conv2d" and s["status"] == "recomputed" for s in reports["auto"]["saved"])
        if budget_kind == "convs" and not convs:
            problems.append("auto under a budget below cheap's planned peak recomputed no convolution")
        finite = all(np.all(np.isfinite(v.astype(np.float64))) for v in states["none"].values() if v.dtype != np.uint16)
        if not finite:
            problems.append("non-finite state")
        failures += bool(problems)
        arenas = ", ".join(f"{p} {reports[p]['arena_bytes'] / 2**20:.2f}" for p in ("none", "cheap", "auto"))
        print(f"{name}: {steps} steps, {len(states['none'])} state tensors; arena MiB {arenas}: "
              + ("FAILED: " + "; ".join(problems) if problems else "ok"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
