"""Non-finite values in a training step, planted in a weight gradient at a random step and kernel
(CASTOR_PLANT_NONFINITE), on the CPU reference or the CUDA backend.

1. fp16 with the dynamic loss scaler: the step is skipped, parameters, moments, BN running
   statistics and the optimizer's step count are bit-identical to the state before it (a skipped
   step is a no-op on the whole state), one skipped step; the run goes on.
2. fp32 with the default non-finite guard, --on-nonfinite stop (the default): the run ends with an
   error naming the step, the first non-finite tensor and its kernel; the last periodic checkpoint
   holds the step before, bit-identical to a clean run's, and resumes.
3. The same with --on-nonfinite skip: the run goes on, the planted step changed no parameter.
4. fp32 compiled with --loss-scale none: the update is applied, the run stops at the first
   non-finite loss saying so; --on-nonfinite skip is refused for such a plan; a malformed
   CASTOR_PLANT_NONFINITE is refused.

Plans: compiled here from the tiny ResNet with --castor, or taken from --plans (the GPU machine
has no compiler): tiny_fp16_adamw.plan, tiny_fp32_adamw.plan, tiny_fp32_unguarded.plan.

Usage: nonfinite.py --castor-run BIN [--castor BIN --models DIR | --plans DIR] --work DIR
                    [--device cpu|cuda] [--seed S]
"""
import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks  # noqa: E402
from mlp_runs import read_state  # noqa: E402

BATCH = 16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--castor-run", required=True)
    ap.add_argument("--castor")
    ap.add_argument("--models")
    ap.add_argument("--plans")
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed} (--seed {seed} repeats this run)")
    checks = Checks(600)
    expect, failures = checks.expect, checks.failures

    plans = args.plans or args.work
    if args.castor:
        onnx = os.path.join(args.work, "tiny.onnx")
        subprocess.run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", "tiny", "--weights", "none",
                        "--image-size", "32", "--num-classes", "10", "-o", onnx], check=True, stdout=subprocess.DEVNULL)
        for name, flags in [("tiny_fp16_adamw", ["--precision", "fp16"]), ("tiny_fp32_adamw", []),
                            ("tiny_fp32_unguarded", ["--loss-scale", "none"])]:
            subprocess.run([args.castor, "compile", onnx, "--init", "kaiming", "--batch", str(BATCH), "--train",
                            "--optimizer", "adamw", "--lr", "1e-4", "-o", os.path.join(plans, name + ".plan")] + flags,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def plan(name):
        return os.path.join(plans, name + ".plan")

    def train(plan_name, tag, steps, extra=(), plant=None):
        state = os.path.join(args.work, tag + ".safetensors")
        env = dict(os.environ)
        env.pop("CASTOR_PLANT_NONFINITE", None)
        if plant:
            env["CASTOR_PLANT_NONFINITE"] = plant
        # Runs are compared bit for bit: on a GPU that takes --deterministic.
        flags = ["--deterministic"] if args.device != "cpu" else []
        r = subprocess.run([args.castor_run, "train", plan(plan_name), "--steps", str(steps), "--device", args.device,
                            "--seed", "5", "--save", state] + flags + list(extra), env=env, capture_output=True,
                           text=True)
        return r, state

    def backward_kernels(plan_name):
        # Weight gradients: each reaches the optimizer whole. (A value planted in an activation's
        # gradient may rightly vanish: ReLU's backward selects, and drops it where the unit was off.)
        out = subprocess.run([args.castor_run, "inspect", plan(plan_name), "--json"], check=True, capture_output=True,
                             text=True).stdout
        kernels = json.loads(out)["plan"]["kernels"]
        return [(i, k) for i, k in enumerate(kernels) if k["op"] == "conv2d_backward_filter"]

    def owned(state):
        # What a skipped step leaves as it was: everything but the counters of steps run and
        # skipped and the loss scaler's fields. BN running statistics included: their update waits
        # for the same flag as the optimizer's (unlike PyTorch's eager forward, docs/reliability.md).
        return {k: v for k, v in state.items() if not k.startswith("castor.") or k == "castor.optimizer_step"}

    def same(a, b):
        return a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a)

    # 1. fp16, dynamic loss scaling.
    step = rng.randint(2, 5)
    kernel, k = rng.choice(backward_kernels("tiny_fp16_adamw"))
    print(f"fp16: NaN after kernel {kernel} ({k['op']} '{k['name']}') in step {step}")
    before, before_state = train("tiny_fp16_adamw", "fp16_before", step - 1)
    planted, planted_state = train("tiny_fp16_adamw", "fp16_planted", step, plant=f"{kernel}@{step}")
    expect(before.returncode == 0 and planted.returncode == 0, f"fp16: both runs end well ({planted.stderr.strip()})")
    if planted.returncode == 0:
        a, b = read_state(before_state), read_state(planted_state)
        expect(same(owned(a), owned(b)), f"fp16: {len(owned(a))} parameters, moments, running statistics and the step "
               "count are bit-identical to the state before the planted step")
        expect(int(b["castor.skipped_steps"]) == 1 and int(b["castor.iteration"]) == step,
               "fp16: one skipped step, the iteration counter advances")
        expect(float(b["castor.loss_scale"]) == float(a["castor.loss_scale"]) / 2, "fp16: the scale backs off")

    # 2. fp32 with the guard: stop.
    step = rng.randint(2, 5)
    kernel, k = rng.choice(backward_kernels("tiny_fp32_adamw"))
    print(f"fp32: inf after kernel {kernel} ({k['op']} '{k['name']}') in step {step}")
    clean, clean_state = train("tiny_fp32_adamw", "fp32_clean", step - 1)
    stopped, ckpt = train("tiny_fp32_adamw", "fp32_stopped", step + 3, ["--save-every", "1"], plant=f"{kernel}@{step}")
    message = next((m for m in stopped.stderr.splitlines() if "castor-run: error" in m), "")
    print(f"        {message}")
    expect(stopped.returncode != 0 and f"step {step}: non-finite gradients" in message and
           f"kernel #{kernel} ({k['op']}" in message and "first non-finite value appears in" in message,
           "fp32 stop: the run ends naming the step, the first non-finite tensor and its kernel", stopped)
    expect(f"the last checkpoint, {ckpt}, holds step {step - 1}" in message, "fp32 stop: the message names the last "
           "checkpoint and its step")
    if clean.returncode == 0 and os.path.exists(ckpt):
        expect(same(read_state(clean_state), read_state(ckpt)),
               f"fp32 stop: the checkpoint is the state after step {step - 1}, bit-identical to a clean run's")
        resumed, _ = train("tiny_fp32_adamw", "fp32_resumed", 2, ["--resume", ckpt])
        expect(resumed.returncode == 0, "fp32 stop: the checkpoint resumes", resumed)
    else:
        expect(False, "fp32 stop: the clean run and the checkpoint exist")

    # 3. fp32 with the guard: skip.
    skipped, skipped_state = train("tiny_fp32_adamw", "fp32_skipped", step, ["--on-nonfinite", "skip"],
                                   plant=f"{kernel}@{step}")
    expect(skipped.returncode == 0 and f"step {step}: non-finite gradients, the update was skipped" in skipped.stderr,
           "fp32 skip: the run goes on and reports the skipped step", skipped)
    if skipped.returncode == 0:
        b = read_state(skipped_state)
        expect(same(owned(read_state(clean_state)), owned(b)) and int(b["castor.skipped_steps"]) == 1,
               "fp32 skip: the planted step changed no parameter, moment, running statistic or step count; one "
               "skipped step")

    # 4. No guard, and refusals.
    step = rng.randint(2, 4)
    kernel, k = rng.choice(backward_kernels("tiny_fp32_unguarded"))
    applied, _ = train("tiny_fp32_unguarded", "fp32_unguarded", step + 3, plant=f"{kernel}@{step}")
    message = next((m for m in applied.stderr.splitlines() if "castor-run: error" in m), "")
    print(f"        {message}")
    expect(applied.returncode != 0 and "and the update was applied" in message,
           "no guard: the run stops at the first non-finite loss and says the update was applied")
    refused, _ = train("tiny_fp32_unguarded", "fp32_refused", 1, ["--on-nonfinite", "skip"])
    expect(refused.returncode != 0 and "--on-nonfinite skip" in refused.stderr,
           "no guard: --on-nonfinite skip is refused")
    bad, _ = train("tiny_fp32_adamw", "bad_plant", 1, plant="nonsense")
    expect(bad.returncode != 0 and "CASTOR_PLANT_NONFINITE" in bad.stderr, "a malformed plant is refused")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
