"""The saved state is always good (docs/reliability.md, "The state check"): on the CPU backend,
each fault below ends the run as it should, with a message naming what went wrong, and leaves the
last good checkpoint as it was (its SHA-256 before and after) and resumable.

1. A non-finite value in a resumed state (a weight, an optimizer moment, a BatchNorm running
   statistic) or a weights file: refused before the first step, nothing saved over the good file.
2. A skipped step changes nothing: a batch norm whose input is never finite (a NaN planted in the
   forward convolution's output at every step) skips every update, in fp32 (--on-nonfinite skip)
   and fp16 (the dynamic loss scaler); the running statistics keep their initial values, the run
   ends non-zero ("all N steps of this run were skipped"), its checkpoint is the state it started
   from; --max-skipped-steps above the step count lets it end well.
3. A learning rate far too large in fp32 (1e30): the run stops at the first non-finite loss or state,
   naming the last checkpoint, which is finite, bit-identical to a clean run's of that many steps,
   and resumes: it loads, passes the state check and its steps run (their overflowing gradients
   skipped by the guard), the state staying finite.
4. --log-json to /dev/full fails the run; --steps 0 is refused, but with --save writes the starting state.
5. State metadata: another format version, a negative step, a state saved by an fp16 plan given to
   an fp32 plan (refused in the user's terms; its weights load with --weights).

Plans: compiled here from the tiny ResNet with --castor, or taken from --plans (the GPU machine
has no compiler: bench/compile_reliability_plans.sh compiles them as state_*.plan). On a device
(--device cuda) every run is --deterministic, so that two runs of the same steps save the same bytes.

Usage: state_check.py --castor-run BIN [--castor BIN --models DIR | --plans DIR] --work DIR
                      [--device cpu|cuda]
       state_check.py --compile-only --castor BIN --models DIR --plans DIR --castor-run BIN --work DIR
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks  # noqa: E402
from mlp_runs import read_state  # noqa: E402

BATCH = 8


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rewrite_state(src, dst, metadata=None, nan_in=None):
    """A copy of safetensors `src` at `dst` with metadata entries replaced and/or the first element of
    tensor `nan_in` set to NaN (the layout, every other byte, kept)."""
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    if metadata:
        header["__metadata__"].update(metadata)
    if nan_in:
        entry = header[nan_in]
        start = entry["data_offsets"][0]
        nan = {"F32": np.array([np.nan], np.float32), "F16": np.array([np.nan], np.float16)}[entry["dtype"]]
        data[start:start + nan.nbytes] = nan.tobytes()
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


PLANS = {"fp32_adamw": ["--optimizer", "adamw", "--lr", "1e-3"],
         "fp16_adamw": ["--optimizer", "adamw", "--lr", "1e-3", "--precision", "fp16"],
         "fp32_sgd": ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9"],
         "fp32_sgd_diverging": ["--optimizer", "sgd", "--lr", "1e30", "--momentum", "0.9"]}


def compile_plans(castor, models, out):
    """The tiny ResNet's training plans of the cases, as out/state_NAME.plan."""
    onnx = os.path.join(out, "tiny.onnx")
    subprocess.run([sys.executable, os.path.join(models, "resnet.py"), "--arch", "tiny", "--weights", "none",
                    "--image-size", "32", "--num-classes", "10", "-o", onnx], check=True, stdout=subprocess.DEVNULL)
    for name, flags in PLANS.items():
        subprocess.run([castor, "compile", onnx, "--init", "kaiming", "--batch", str(BATCH), "--train",
                        "-o", os.path.join(out, f"state_{name}.plan")] + flags, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--castor-run", required=True)
    ap.add_argument("--castor")
    ap.add_argument("--models")
    ap.add_argument("--plans", help="precompiled state_NAME.plan files (bench/compile_reliability_plans.sh)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compile-only", action="store_true", help="compile the plans into --plans and stop")
    args = ap.parse_args()
    if not args.plans and not (args.castor and args.models):
        ap.error("give --castor and --models, or --plans")
    if args.compile_only:
        if not (args.plans and args.castor and args.models):
            ap.error("--compile-only needs --plans, --castor and --models")
        os.makedirs(args.plans, exist_ok=True)
        compile_plans(args.castor, args.models, args.plans)
        return
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    checks = Checks(800)
    expect, failures = checks.expect, checks.failures

    def path(name):
        return os.path.join(args.work, name)

    plan_dir = args.plans or args.work
    if not args.plans:
        compile_plans(args.castor, args.models, args.work)

    def plan_path(name):
        return os.path.join(plan_dir, f"state_{name}.plan")

    def train(plan, steps, extra=(), plant=None):
        env = dict(os.environ)
        env.pop("CASTOR_PLANT_NONFINITE", None)
        if plant:
            env["CASTOR_PLANT_NONFINITE"] = plant
        device = ["--device", args.device] + (["--deterministic"] if args.device != "cpu" else [])
        r = subprocess.run([args.castor_run, "train", plan_path(plan), "--steps", str(steps), "--seed", "5"] + device +
                           list(extra), env=env, capture_output=True, text=True)
        r.message = next((m for m in r.stderr.splitlines() if "castor-run: error" in m), "")
        print(f"        {' '.join(['train', plan, str(steps)] + list(extra))}: exit {r.returncode} {r.message}")
        return r

    def finite(state_path):
        return all(np.isfinite(v.astype(np.float64)).all() for k, v in read_state(state_path).items()
                   if v.dtype != np.int64 and v.dtype != np.uint16)

    # 1. A non-finite value in a loaded state.
    good = path("good.safetensors")
    r = train("fp32_adamw", 2, ["--save", good])
    expect(r.returncode == 0, "a clean fp32 run saves a good state", r)
    keys = list(read_state(good).keys())
    weight = next(k for k in keys if k.endswith("conv1.weight"))
    moment = next(k for k in keys if k.endswith(".exp_avg"))
    running = next(k for k in keys if k.endswith(".running_var"))
    good_sha = sha256(good)
    for what, name in [("a weight", weight), ("a moment", moment), ("a running statistic", running)]:
        bad = path(f"bad_{what.split()[-1]}.safetensors")
        rewrite_state(good, bad, nan_in=name)
        bad_sha = sha256(bad)
        r = train("fp32_adamw", 2, ["--resume", bad, "--save", good, "--save-every", "1"])
        expect(r.returncode != 0 and f"the state {bad} holds a non-finite value in '{name}' (1 of" in r.message,
               f"resuming a state with NaN in {what} ('{name}') is refused naming it", r)
        expect(sha256(good) == good_sha and sha256(bad) == bad_sha,
               f"NaN in {what}: the good checkpoint and the bad state keep their bytes (SHA-256)")
        if what == "a weight":
            r = train("fp32_adamw", 1, ["--weights", bad, "--save", good])
            expect(r.returncode != 0 and f"the weights file {bad} holds a non-finite value in '{name}'" in r.message
                   and sha256(good) == good_sha, "--weights with a NaN weight is refused, the good state untouched", r)
    r = train("fp32_adamw", 2, ["--resume", good])
    expect(r.returncode == 0, "the good state still resumes", r)

    # 2. Skipped steps leave no trace: a NaN in the first convolution's output at every step.
    inspect = json.loads(subprocess.run([args.castor_run, "inspect", plan_path("fp32_adamw"), "--json"],
                                        check=True, capture_output=True, text=True).stdout)
    for precision, plan, extra in [("fp32", "fp32_adamw", ["--on-nonfinite", "skip"]), ("fp16", "fp16_adamw", [])]:
        kernels = json.loads(subprocess.run([args.castor_run, "inspect", plan_path(plan), "--json"], check=True,
                                            capture_output=True, text=True).stdout)["plan"]["kernels"]
        conv = next(i for i, k in enumerate(kernels) if k["op"].startswith("conv2d") and "backward" not in k["op"])
        plant = f"{conv}@*"
        ckpt, ref = path(f"skip_{precision}.safetensors"), path(f"skip_{precision}_ref.safetensors")
        r = train(plan, 3, extra + ["--save", ckpt, "--save-every", "1"], plant=plant)
        expect(r.returncode != 0 and "all 3 steps of this run were skipped" in r.message and
               f"the last checkpoint, {ckpt}, holds step 2" in r.message,
               f"{precision}: a run whose every step is skipped ends non-zero saying so, naming its checkpoint", r)
        ok = train(plan, 2, extra + ["--save", ref, "--max-skipped-steps", "3"], plant=plant)
        expect(ok.returncode == 0, f"{precision}: with --max-skipped-steps above its skips the run ends well", ok)
        if os.path.exists(ckpt) and os.path.exists(ref):
            s = read_state(ckpt)
            means = [v for k, v in s.items() if k.endswith(".running_mean")]
            variances = [v for k, v in s.items() if k.endswith(".running_var")]
            moments = [v for k, v in s.items() if k.endswith((".exp_avg", ".exp_avg_sq"))]
            expect(sha256(ckpt) == sha256(ref), f"{precision}: the checkpoint it names is bit-identical (SHA-256) to "
                   "the state another run of 2 skipped steps saves")
            expect(means and all((m == 0).all() for m in means) and all((v == 1).all() for v in variances) and
                   all((m == 0).all() for m in moments) and int(s["castor.optimizer_step"]) == 0 and
                   int(s["castor.skipped_steps"]) == 2,
                   f"{precision}: running statistics, moments and the optimizer's step count keep their initial "
                   f"values ({len(means)} batch norms); 2 skipped steps counted")
        else:
            expect(False, f"{precision}: both checkpoints exist")

    # 3. A diverging learning rate in fp32.
    ckpt = path("diverging.safetensors")
    r = train("fp32_sgd_diverging", 10, ["--save", ckpt, "--save-every", "1"])
    held = None
    marker = f"the last checkpoint, {ckpt}, holds step "
    if marker in r.message:
        held = int(r.message.split(marker)[1].split(";")[0].split()[0])
    expect(r.returncode != 0 and held is not None and
           ("the state after this step holds a non-finite value in '" in r.message or
            "non-finite gradients" in r.message),
           "fp32, --lr 1e30: the run stops at the first non-finite state or gradients, naming the last checkpoint", r)
    if held is not None and os.path.exists(ckpt):
        after_sha = sha256(ckpt)
        clean = path("diverging_clean.safetensors")
        c = train("fp32_sgd_diverging", held, ["--save", clean])
        expect(c.returncode == 0 and sha256(clean) == after_sha and finite(ckpt),
               f"fp32 diverging: the checkpoint (step {held}) is finite and bit-identical (SHA-256) to a clean run's "
               f"of {held} steps")
        # Its weights are finite but huge (the step of lr 1e30 is in them): it loads and passes the
        # state check, and the guard keeps it as it is where its next gradients overflow.
        resumed = train("fp32_sgd", 2, ["--resume", ckpt, "--on-nonfinite", "skip", "--max-skipped-steps", "3",
                                        "--save", path("diverging_resumed.safetensors")])
        expect(resumed.returncode == 0 and finite(path("diverging_resumed.safetensors")),
               "fp32 diverging: the checkpoint resumes (it loads, its steps run, the state stays finite)", resumed)

    # 4. A log that cannot be written; a run of no steps.
    r = train("fp32_adamw", 2, ["--resume", good, "--save", good, "--log-json", "/dev/full"])
    expect(r.returncode != 0 and "writing the log /dev/full failed (No space left on device)" in r.message and
           sha256(good) == good_sha, "--log-json /dev/full fails the run; the state it resumed keeps its bytes", r)
    r = train("fp32_adamw", 0, [])
    expect(r.returncode != 0 and "--steps 0: a run trains at least one step" in r.message,
           "--steps 0 without --save is refused", r)
    start = path("start.safetensors")
    r = train("fp32_adamw", 0, ["--resume", good, "--save", start])
    same = r.returncode == 0 and all(np.array_equal(a, b) for a, b in
                                     zip(read_state(good).values(), read_state(start).values()))
    expect(same and "trained no steps (--steps 0)" in r.stdout,
           "--steps 0 --save writes the starting state (the resumed one, tensor for tensor)", r)

    # 5. State metadata and the plan's identity.
    for what, meta, says in [("format 'training-state 99'", {"castor.format": "training-state 99"},
                              "format 'training-state 99' is not one this castor-run reads"),
                             ("step -7", {"castor.step": "-7"}, "the step it says it holds, '-7', is not a number")]:
        bad = path("bad_meta.safetensors")
        rewrite_state(good, bad, metadata=meta)
        r = train("fp32_adamw", 1, ["--resume", bad, "--save", good])
        expect(r.returncode != 0 and says in r.message and sha256(good) == good_sha,
               f"a state saying {what} is refused", r)
    half = path("fp16.safetensors")
    r = train("fp16_adamw", 2, ["--save", half])
    half_sha = sha256(half)
    r = train("fp32_adamw", 1, ["--resume", half, "--save", good])
    expect(r.returncode != 0 and "this state was saved by a plan with different parameters (" in r.message and
           "compile with the same --precision" in r.message and "--weights" in r.message and
           "castor.constant" not in r.message and "weights file" not in r.message and sha256(good) == good_sha,
           "an fp16 plan's state resumed by an fp32 plan is refused in the user's terms", r)
    r = train("fp32_adamw", 1, ["--weights", half])
    expect(r.returncode == 0 and sha256(half) == half_sha, "its weights load into the fp32 plan with --weights", r)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
