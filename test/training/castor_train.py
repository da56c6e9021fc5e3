"""ONNX to a trained model in one command: `castor train MODEL.onnx [compile flags] [run flags]`
compiles into the plan cache on the first call and reuses the plan on the next ones (the same
compiler, model and compile flags, in any order or spelling), trains exactly as the two-step path
(castor compile, then castor-run train) does, and refuses what it cannot do with a clear message,
leaving no half-written cache entry.

Usage: castor_train.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks  # noqa: E402


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    cache = os.path.join(a.work, "cache")
    env = dict(os.environ, CASTOR_PLAN_CACHE=cache)
    castor, castor_run = os.path.join(a.bin, "castor"), os.path.join(a.bin, "castor-run")
    checks = Checks()
    expect = checks.expect

    def path(name):
        return os.path.join(a.work, name)

    def run(cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        print(f"        {' '.join(os.path.basename(c) if c.startswith(a.work) else c for c in cmd[1:])}: "
              f"exit {r.returncode}")
        return r

    def entries():
        return sorted(os.listdir(cache)) if os.path.isdir(cache) else []

    model = path("tiny.onnx")
    subprocess.run([sys.executable, os.path.join(a.models, "resnet.py"), "--arch", "tiny", "--weights", "none",
                    "--image-size", "32", "--num-classes", "10", "-o", model], check=True, stdout=subprocess.DEVNULL)
    compile_flags = ["--init", "kaiming", "--batch", "8", "--optimizer", "adamw", "--lr", "1e-3"]
    run_flags = ["--steps", "3", "--data", "synthetic", "--seed", "4"]

    # The first call compiles into the cache, then trains.
    r = run([castor, "train", model] + compile_flags + run_flags + ["--save", path("one.safetensors")])
    expect(r.returncode == 0 and "castor train: compiled in" in r.stderr and "trained steps 1..3" in r.stdout,
           "the first call compiles the plan into the cache and trains it", r)
    expect(len(entries()) == 1, f"one cache entry ({entries()})")
    plan = os.path.join(cache, entries()[0], "train.plan") if entries() else ""
    plan_sha = sha256(plan) if os.path.exists(plan) else None
    mtime = os.stat(plan).st_mtime_ns if plan_sha else None

    # The second call, with the same flags reordered and spelt --flag=value, reuses it.
    r = run([castor, "train", model, "--lr=1e-3", "--optimizer=adamw"] + run_flags + ["--batch", "8", "--init", "kaiming",
                                                                                      "--save", path("two.safetensors")])
    expect(r.returncode == 0 and f"castor train: the plan from the cache: {plan}" in r.stderr and
           "compiled in" not in r.stderr, "the second call takes the plan from the cache", r)
    expect(plan_sha is not None and sha256(plan) == plan_sha and os.stat(plan).st_mtime_ns == mtime and
           len(entries()) == 1, "the cached plan is untouched (SHA-256, mtime) and no entry is added")
    expect(os.path.exists(path("two.safetensors")) and sha256(path("one.safetensors")) == sha256(path("two.safetensors")),
           "both calls train the same state, byte for byte")

    # The two-step path gives the same state.
    manual = path("manual.plan")
    c = run([castor, "compile", model] + compile_flags + ["--seed", "4", "--train", "-o", manual])
    t = run([castor_run, "train", manual] + run_flags + ["--save", path("manual.safetensors")])
    expect(c.returncode == 0 and t.returncode == 0 and
           sha256(path("manual.safetensors")) == sha256(path("one.safetensors")),
           "castor compile + castor-run train save the same state as castor train", t)

    # Another compile flag is another entry; a cosine schedule without --total-steps spans --steps.
    r = run([castor, "train", model] + compile_flags[:-1] + ["2e-3", "--schedule", "cosine"] + run_flags)
    expect(r.returncode == 0 and "compiled in" in r.stderr and len(entries()) == 2,
           "a different --lr compiles a second entry", r)
    cosine = [e for e in entries() if os.path.join(cache, e, "train.plan") != plan]
    if cosine:
        kernels = json.loads(subprocess.run([castor_run, "inspect", os.path.join(cache, cosine[0], "train.plan"),
                                             "--json"], capture_output=True, text=True).stdout)["plan"]["kernels"]
        schedule = next(k["attrs"] for k in kernels if k["op"] == "lr_schedule")
        expect(schedule["kind"]["s"] == "cosine" and schedule["total_steps"]["ints"]["values"] == ["3"],
               "--schedule cosine without --total-steps: the schedule spans the run's --steps (3)")

    # Refusals: clear messages, exit status non-zero, nothing half-written in the cache.
    before = entries()
    r = run([castor, "train", model, "-o", path("x.plan")] + run_flags)
    expect(r.returncode != 0 and "-o is castor compile's alone" in r.stderr, "-o is refused, saying why", r)
    r = run([castor, "train", path("missing.onnx")] + run_flags)
    expect(r.returncode != 0 and "missing.onnx: no such file" in r.stderr, "a missing model is named", r)
    bad = path("bad.onnx")
    with open(bad, "wb") as f:
        f.write(b"not a model")
    r = run([castor, "train", bad] + run_flags)
    expect(r.returncode != 0 and "bad.onnx" in r.stderr and entries() == before,
           "a model that does not parse fails the compile, naming the file; the cache gains nothing "
           f"(no staging folder left: {entries()})", r)
    r = run([castor, "train", model] + compile_flags + ["--steps", "3", "--data", "nowhere:dir"])
    expect(r.returncode != 0 and "castor-run: error" in r.stderr and "nowhere" in r.stderr,
           "a bad run flag is castor-run train's error", r)
    r = run([castor, "train", "--help"])
    expect(r.returncode == 0 and "usage: castor train MODEL.onnx" in r.stdout, "castor train --help shows the usage", r)
    sys.exit(1 if checks.failures else 0)


if __name__ == "__main__":
    main()
