"""Weights find their plan: `castor compile` of a model with initializers writes
MODEL.weights.safetensors beside the plan and records its name and SHA-256 in the plan, and
`castor-run` (train, infer, bench) loads it without being told. An explicit --weights wins; a
weights file that is not the compiled one, or a missing one, is refused with a message naming
it, before anything runs.

Usage: weights_pairing.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import os
import shutil
import subprocess
import sys


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    castor, castor_run = os.path.join(a.bin, "castor"), os.path.join(a.bin, "castor-run")
    model = os.path.join(a.work, "mlp.onnx")
    r = run([sys.executable, os.path.join(a.models, "mlp.py"), "--hidden", "16", "--weights", "random", "-o", model])
    assert r.returncode == 0, r.stderr
    plan = os.path.join(a.work, "mlp.plan")
    weights = os.path.join(a.work, "mlp.weights.safetensors")
    other = os.path.join(a.work, "other.safetensors")
    r = run([castor, "compile", model, "--train", "--batch", "4", "-o", plan])
    assert r.returncode == 0, r.stderr
    assert os.path.exists(weights), "castor compile wrote no weights file"
    train = [castor_run, "train", plan, "--steps", "2", "--data", "synthetic", "--seed", "1"]
    failures = []

    def check(name, cmd, ok, needle=""):
        r = run(cmd)
        text = r.stdout + r.stderr
        good = (r.returncode == 0) == ok and needle in text
        print(f"{name}: exit {r.returncode}: {'ok' if good else 'FAILED'}")
        if not good:
            failures.append(name)
            print(text[-2000:])

    inspect = run([castor_run, "inspect", "--json", plan])
    if "mlp.weights.safetensors" not in inspect.stdout:
        failures.append("inspect")
        print("inspect does not show the plan's weights file")
    # Without the pairing the plan's parameters (initialised from the file) could not load.
    check("default: the weights file beside the plan", train, True)
    check("bench loads it too", [castor_run, "bench", plan, "--device", "cpu", "--steps", "1", "--warmup", "0"], True)
    shutil.copy(weights, other)
    with open(weights, "r+b") as f:  # same size, one byte changed: only the checksum can tell
        f.seek(os.path.getsize(weights) - 1)
        last = f.read(1)
        f.seek(os.path.getsize(weights) - 1)
        f.write(bytes([last[0] ^ 1]))
    check("a changed weights file is refused", train, False, "is not the one compiled with")
    check("an explicit --weights wins", train + ["--weights", other], True)
    os.remove(weights)
    check("a missing weights file is refused, named", train, False, weights + " is missing")
    check("an explicit --weights still wins", train + ["--weights", other], True)
    # A plan whose parameters all have initializers names no weights file and needs none.
    r = run([castor, "compile", model, "--train", "--batch", "4", "--init", "kaiming",
             "-o", os.path.join(a.work, "seeded.plan")])
    assert r.returncode == 0, r.stderr
    check("a plan without a weights file", [castor_run, "train", os.path.join(a.work, "seeded.plan"), "--steps", "1",
                                            "--data", "synthetic"], True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
