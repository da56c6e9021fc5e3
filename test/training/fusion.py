"""Fused and unfused plans of one model train identically on the CPU reference: the fused kernels
(batch_norm_relu_training and its backward, a convolution's data gradient with the input's other
gradient accumulated, fused_elementwise groups of castor-fuse-elementwise) are defined as the
groups they replace, so after N AdamW steps every state tensor (parameters, moments, running
statistics, loss scaler) must be bit-identical. Also checks that `--fuse auto` made each fusion
the case expects and `--fuse none` none, so the comparison cannot pass vacuously, and that
`castor-run bench --json` reports every fused kernel of the fused plan (the cpu backend's way:
"reference") and none of the unfused one.

Usage: fusion.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_runs import read_state  # noqa: E402

FUSED_OPS = ("batch_norm_relu_training", "batch_norm_relu_training_backward")
ACCUMULATING = "conv2d_backward_data+accumulate"  # castor-fuse-gradient-add's kernels
ELEMENTWISE = "fused_elementwise"  # castor-fuse-elementwise's groups
REDUCING = "fused_elementwise+reduction"  # those of them with a reduction output
RECOMPUTED = "recomputed in groups"  # castor-recompute-elementwise's values (SiLU's sigmoid)

# (name, resnet.py arch, activation, precision, batch, steps, fusions the fused plan must show:
# "bn" batch-norm groups, "accumulate" accumulating data gradients, "elementwise" fused
# element-wise groups, "reduction" groups with a reduction output: squeeze-excitation's pool,
# the sums of its scale's gradient; "recomputed" forward values computed again in the backward's
# groups instead of stored, castor-recompute-elementwise); relu6: every ReLU a Clip(0, 6), whose batch-norm groups fuse with clip_max
# (those after a residual add stay unfused). Arch "torchvision:NAME": the training-mode export
# test/fixtures/torchvision/NAME_train.onnx (224x224) as it is: MobileNetV2's ReLU6 after
# depthwise convolutions, its inverted residuals; EfficientNet-B0's SiLU (sigmoid and mul) and
# squeeze-excitation (a per-sample, per-channel product). Arch "transformer": the miniature ViT
# block of test/cuda/make_tiny_transformer.py (layer norm, attention, GELU, drop path).
CASES = [
    ("tiny_fp16", "tiny", "relu", "fp16", 8, 50, {"bn", "accumulate"}),
    ("tiny_bf16", "tiny", "relu", "bf16", 8, 50, {"bn", "accumulate"}),
    ("tiny_relu6_fp16", "tiny", "relu6", "fp16", 8, 50, {"bn", "accumulate", "elementwise"}),
    ("tiny_fp32", "tiny", "relu", "fp32", 8, 50, {"accumulate", "elementwise"}),
    ("resnet18_fp16", "resnet18", "relu", "fp16", 4, 6, {"bn", "accumulate"}),
    ("mobilenet_v2_fp16", "torchvision:mobilenet_v2", "relu6", "fp16", 2, 3, {"bn", "accumulate"}),
    ("tiny_silu_bf16", "tiny", "silu", "bf16", 8, 50, {"elementwise", "recomputed"}),
    ("efficientnet_b0_fp16", "torchvision:efficientnet_b0", "silu", "fp16", 2, 2,
     {"elementwise", "reduction", "recomputed"}),
    ("transformer_bf16", "transformer", "gelu", "bf16", 2, 50, {"elementwise"}),
]
# Cases whose unfused plan is `--fuse patterns` (every pattern fusion, no generated kernels) rather
# than `--fuse none`: the exported erf chain of GELU, which castor-fuse-gelu rewrites into gelu,
# computes another rounding of the same function, so only the generated kernels are compared.
AGAINST_PATTERNS = {"transformer_bf16"}
TRANSFORMER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda", "make_tiny_transformer.py")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "torchvision")


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def op_counts(bin_dir, plan):
    out = subprocess.run([os.path.join(bin_dir, "castor-run"), "inspect", "--json", plan], check=True,
                         capture_output=True, text=True).stdout
    counts = {}
    for k in json.loads(out)["plan"]["kernels"]:
        op = k["op"] + ("+accumulate" if k["op"] == "conv2d_backward_data" and len(k["inputs"]) == 3 else "")
        counts[op] = counts.get(op, 0) + 1
        # A generated group with a reduction output: its program's out line sums or averages.
        out_line = k.get("attrs", {}).get("program", {}).get("s", "").strip().splitlines()[-1:] or [""]
        if k["op"] == ELEMENTWISE and ("sum(" in out_line[0] or "mean(" in out_line[0]):
            counts[REDUCING] = counts.get(REDUCING, 0) + 1
    return counts


def bench_fusion_report(bin_dir, plan):
    out = subprocess.run([os.path.join(bin_dir, "castor-run"), "bench", plan, "--device", "cpu", "--steps", "1",
                          "--warmup", "0", "--json"], check=True, capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    report = json.loads(line)
    report["fusion"]["generated"] = report["generated"]
    return report["fusion"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    for name, arch, activation, precision, batch, steps, expected in CASES:
        model = os.path.join(args.work, f"{arch}_{activation}.onnx")
        if arch.startswith("torchvision:"):
            model = os.path.join(FIXTURES, arch.split(":", 1)[1] + "_train.onnx")
        elif arch == "transformer":
            run([sys.executable, TRANSFORMER, model])
        elif not os.path.exists(model):
            run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", arch, "--activation", activation,
                 "--weights", "none", "--image-size", "32", "--num-classes", "10", "-o", model])
        states, counts = {}, {}
        unfused = "patterns" if name in AGAINST_PATTERNS else "none"
        for fuse in ("auto", unfused):
            plan = os.path.join(args.work, f"{name}_{fuse}.plan")
            state = os.path.join(args.work, f"{name}_{fuse}.safetensors")
            # A smaller first loss scale for the torchvision models, whose few steps would all overflow
            # from 65536 and be skipped (a run of skipped steps only, which castor-run refuses).
            scale = ["--loss-scale-init", "1024"] if arch.startswith("torchvision:") else []
            report_dir = os.path.join(args.work, f"{name}_{fuse}_report")
            shutil.rmtree(report_dir, ignore_errors=True)  # a picture of an earlier run must not count
            summary = subprocess.run(
                [os.path.join(args.bin, "castor"), "compile", model, "--init", "kaiming", "--batch", str(batch),
                 "--train", "--precision", precision, "--optimizer", "adamw", "--lr", "1e-3", "--fuse", fuse,
                 "-o", plan, "--report", report_dir, "--report-picture=false"] + scale,
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
            counts["none" if fuse == unfused else fuse] = op_counts(args.bin, plan)
            # castor-recompute-elementwise's count, as the compile summary says it.
            in_groups = re.search(r"element-wise groups, not stored: (\d+) values", summary)
            counts["none" if fuse == unfused else fuse][RECOMPUTED] = int(in_groups.group(1)) if in_groups else 0
            run([os.path.join(args.bin, "castor-run"), "train", plan, "--device", "cpu", "--steps", str(steps),
                 "--data", "synthetic", "--seed", "7", "--save", state])
            states["none" if fuse == unfused else fuse] = read_state(state)
        fused = sum(counts["auto"].get(op, 0) for op in FUSED_OPS)
        absent = (ELEMENTWISE, RECOMPUTED) if unfused == "patterns" else FUSED_OPS + (ACCUMULATING, ELEMENTWISE, RECOMPUTED)
        unfused_has = sum(counts["none"].get(op, 0) for op in absent)
        accumulating = counts["auto"].get(ACCUMULATING, 0)
        elementwise = counts["auto"].get(ELEMENTWISE, 0)
        made = {"bn": fused, "accumulate": accumulating, "elementwise": elementwise,
                "reduction": counts["auto"].get(REDUCING, 0), "recomputed": counts["auto"][RECOMPUTED]}
        a, b = states["auto"], states["none"]
        differing = sorted(n for n in a if n not in b or a[n].tobytes() != b[n].tobytes())
        missing = sorted(set(b) - set(a))
        # The report lists each fused kernel: the batch-norm groups and the accumulating gradients.
        reported = {"none" if fuse == unfused else fuse:
                    bench_fusion_report(args.bin, os.path.join(args.work, f"{name}_{fuse}.plan"))
                    for fuse in ("auto", unfused)}
        total = fused + accumulating + elementwise
        generated = reported["auto"]["generated"]
        # By group kind: every generated kernel under one kind (its large ones again under KIND_large),
        # the reducing ones under "reduce".
        kinds = {k: v for k, v in generated["by_kind"].items() if not k.endswith("_large")}
        by_kind_ok = (set(kinds) <= {"map", "broadcast", "reduce"}
                      and sum(v["kernels"] for v in kinds.values()) == elementwise
                      and sum(v["bytes"] for v in kinds.values()) == generated["bytes"]
                      and kinds.get("reduce", {}).get("kernels", 0) == counts["auto"].get(REDUCING, 0)
                      and all(generated["by_kind"][k]["kernels"] <= kinds[k[:-6]]["kernels"]
                              for k in generated["by_kind"] if k.endswith("_large")))
        # castor compile --report lists the same groups with the same kinds.
        with open(os.path.join(args.work, f"{name}_auto_report", "fusion.json")) as f:
            listed = json.load(f)["groups"]
        listed_kinds = {}
        for g in listed:
            listed_kinds[g["kind"]] = listed_kinds.get(g["kind"], 0) + 1
        by_kind_ok = by_kind_ok and len(listed) == elementwise and listed_kinds == {
            k: v["kernels"] for k, v in kinds.items()}
        if not by_kind_ok:
            print(f"{name}: castor-run bench's generated kernels by kind {generated['by_kind']} do not add up to "
                  f"{elementwise} kernels, {generated['bytes']} bytes, {counts['auto'].get(REDUCING, 0)} reducing: FAILED")
        # --report-picture=false: the JSON files only.
        pictures = [f for fuse in ("auto", unfused) for f in ("memory.png", "report.html")
                    if os.path.exists(os.path.join(args.work, f"{name}_{fuse}_report", f))]
        if pictures:
            print(f"{name}: --report-picture=false drew {pictures}: FAILED")
        report_ok = by_kind_ok and not pictures and (reported["auto"]["fused_kernels"] == total
                     and reported["auto"]["ways"] == {"reference": total}
                     and generated["kernels"] == elementwise and (generated["bytes"] > 0) == (elementwise > 0)
                     and reported["none"]["generated"]["kernels"] == 0
                     and sum(l["op"] == "conv2d_backward_data" for l in reported["auto"]["layers"]) == accumulating
                     and reported["none"]["fused_kernels"] == 0)
        if not report_ok:
            print(f"{name}: castor-run bench's fusion report {reported['auto']['fused_kernels']} kernels, "
                  f"ways {reported['auto']['ways']} (expected {total}); unfused plan "
                  f"{reported['none']['fused_kernels']}: FAILED")
        ok = (all(made[kind] > 0 for kind in expected) and unfused_has == 0 and not differing and not missing
              and report_ok)
        failures += not ok
        print(f"{name}: {fused} fused batch-norm kernels, {accumulating} data gradients accumulating, "
              f"{elementwise} fused element-wise groups ({made['reduction']} reducing, {made['recomputed']} values "
              f"recomputed in them) (expected: {', '.join(sorted(expected))}; unfused plan: "
              f"{unfused_has}), {steps} steps, {len(a)} state tensors, "
              f"{len(differing) + len(missing)} differ: {'ok' if ok else 'FAILED'}"
              + (f" ({', '.join((differing + missing)[:5])})" if differing or missing else ""))
        finite = all(np.all(np.isfinite(v.astype(np.float64))) for n, v in a.items() if v.dtype != np.uint16)
        if not finite:  # identical NaNs would be a broken run on both sides, not agreement
            print(f"{name}: non-finite state: FAILED")
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
