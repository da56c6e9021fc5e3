"""Data-parallel training on the CPU backend (castor compile --data-parallel, castor-run train
--replicas N):

1. Two replicas with batch 4 against one process with batch 8, 20 AdamW steps on the same .npy
   data (replica r takes the batch of step 2s + r, so the two together see what the one sees):
   every state tensor agrees within 1e-5 of its largest magnitude (fp32 rounding: the mean of two
   half-batch gradients against the gradient of the whole batch; measured 1.5e-7), and the
   logged losses within 1e-5. Without the all_reduce, or with a sum instead of the mean, the
   states differ by far more.
   The same on an IDX set whose epochs end every 5 steps and on an image folder (JPEGs decoded,
   cropped and flipped on the host), whose batches follow a cursor: each replica takes its share
   of each step's 8 samples of the epoch's order.
   With batch norm (a small ResNet): --sync-batch-norm gives the same agreement, statistics over
   both replicas' batches forward and backward; per-replica statistics (the default) do not. In
   fp16, where batch norm is fused with ReLU, the logged losses over 10 steps stay within 1e-3
   of one process's (f16 rounding; measured 1.1e-4), per-replica statistics 9.3e-3 away.
2. Each replica took its own batches: the same plan run by the two replicas without reducing
   (each alone, on its shard's data) ends elsewhere than the pair.
3. Faults: a replica that never joins makes replica 0 stop within the timeout, naming it; a
   replica killed mid-run makes the other stop within the timeout, naming it; a plan compiled
   without --data-parallel is refused under several replicas.

Usage: data_parallel.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_runs import read_state  # noqa: E402

STEPS = 20


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (the replicas bind it again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def write_idx(directory, rng, count):
    """train-images-idx3-ubyte and train-labels-idx1-ubyte with `count` 28x28 images."""
    os.makedirs(directory, exist_ok=True)
    images = rng.integers(0, 256, (count, 28, 28)).astype(np.uint8)
    labels = rng.integers(0, 10, count).astype(np.uint8)
    with open(os.path.join(directory, "train-images-idx3-ubyte"), "wb") as f:
        f.write(np.array([0x803, count, 28, 28], ">u4").tobytes() + images.tobytes())
    with open(os.path.join(directory, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(np.array([0x801, count], ">u4").tobytes() + labels.tobytes())


def worst_relative(a, b):
    worst = 0.0
    for name in b:
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        worst = max(worst, float(np.max(np.abs(x - y)) / (np.max(np.abs(y)) + 1e-30)))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    castor, castor_run = os.path.join(args.bin, "castor"), os.path.join(args.bin, "castor-run")
    w = lambda name: os.path.join(args.work, name)  # noqa: E731
    failures = []

    def check(ok, what):
        print(f"{what}: {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(what)

    model = w("mlp.onnx")
    subprocess.run([sys.executable, os.path.join(args.models, "mlp.py"), "--hidden", "32", "--weights", "none", "-o",
                    model], check=True, stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(3)
    os.makedirs(w("data"), exist_ok=True)
    np.save(w("data/images.npy"), rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    np.save(w("data/labels.npy"), rng.integers(0, 10, 64).astype(np.int64))
    data = "npy:" + w("data")
    common = ["--init", "kaiming", "--train", "--optimizer", "adamw", "--lr", "1e-3"]
    subprocess.run([castor, "compile", model, "--batch", "4", "--data-parallel", "-o", w("dp4.plan")] + common,
                   check=True, capture_output=True)
    subprocess.run([castor, "compile", model, "--batch", "8", "-o", w("one8.plan")] + common, check=True,
                   capture_output=True)
    subprocess.run([castor, "compile", model, "--batch", "4", "-o", w("plain4.plan")] + common, check=True,
                   capture_output=True)

    # 1. Two replicas against one process with their two batches at once.
    for f in ("dp.jsonl", "one.jsonl"):
        if os.path.exists(w(f)):
            os.remove(w(f))
    pair = run([castor_run, "train", w("dp4.plan"), "--replicas", "2", "--steps", str(STEPS), "--data", data,
                "--save", w("dp.safetensors"), "--log-json", w("dp.jsonl")], timeout=300)
    one = run([castor_run, "train", w("one8.plan"), "--steps", str(STEPS), "--data", data, "--save",
               w("one.safetensors"), "--log-json", w("one.jsonl")], timeout=300)
    check(pair.returncode == 0 and one.returncode == 0, "two replicas and one process train")
    if pair.returncode or one.returncode:
        print(pair.stderr, one.stderr)
        sys.exit(1)
    a, b = read_state(w("dp.safetensors")), read_state(w("one.safetensors"))
    floats = {k for k in b if b[k].dtype.kind == "f"}
    worst = worst_relative(a, {k: b[k] for k in floats})
    ints_equal = all(np.array_equal(a[k], b[k]) for k in b if k not in floats)
    check(set(a) == set(b) and worst <= 1e-5 and ints_equal,
          f"2 replicas x batch 4 against 1 x batch 8, {STEPS} steps: {len(b)} state tensors, worst difference "
          f"{worst:.2e} of the tensor's largest magnitude (bound 1e-5)")
    la, lb = losses(w("dp.jsonl")), losses(w("one.jsonl"))
    loss_gap = max(abs(x - y) for x, y in zip(la, lb))
    check(len(la) == len(lb) == STEPS and loss_gap <= 1e-5, f"logged losses (the replicas' mean), worst gap {loss_gap:.2e}")

    # The same on IDX data: 40 images, an epoch every 5 steps of 8.
    write_idx(w("idx"), rng, 40)
    pair = run([castor_run, "train", w("dp4.plan"), "--replicas", "2", "--steps", "12", "--data", "idx:" + w("idx"),
                "--seed", "2", "--save", w("dp_idx.safetensors")], timeout=300)
    one = run([castor_run, "train", w("one8.plan"), "--steps", "12", "--data", "idx:" + w("idx"), "--seed", "2",
               "--save", w("one_idx.safetensors")], timeout=300)
    ok = pair.returncode == 0 and one.returncode == 0
    worst = worst_relative(read_state(w("dp_idx.safetensors")), {k: read_state(w("one_idx.safetensors"))[k]
                                                                  for k in floats}) if ok else float("inf")
    check(ok and worst <= 1e-5, f"IDX data, 12 steps over 3 epochs: worst difference {worst:.2e} (bound 1e-5)")
    if not ok:
        print(pair.stderr, one.stderr)

    # And on an image folder: 4 classes of 8 JPEGs, a 3-channel model.
    subprocess.run([sys.executable, os.path.join(os.path.dirname(args.models), "scripts", "make_image_folder.py"),
                    "--kind", "synthetic", "--out", w("folder"), "--classes", "4", "--per-class", "8", "--width", "48",
                    "--height", "40"], check=True, capture_output=True)
    subprocess.run([sys.executable, os.path.join(args.models, "mlp.py"), "--hidden", "16", "--in-channels", "3",
                    "--image-size", "32", "--num-classes", "4", "--weights", "none", "-o", w("mlp3.onnx")], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([castor, "compile", w("mlp3.onnx"), "--batch", "4", "--data-parallel", "-o", w("f4.plan")] + common,
                   check=True, capture_output=True)
    subprocess.run([castor, "compile", w("mlp3.onnx"), "--batch", "8", "-o", w("f8.plan")] + common, check=True,
                   capture_output=True)
    pair = run([castor_run, "train", w("f4.plan"), "--replicas", "2", "--steps", "6", "--data", "folder:" + w("folder"),
                "--seed", "2", "--save", w("dp_folder.safetensors")], timeout=300)
    one = run([castor_run, "train", w("f8.plan"), "--steps", "6", "--data", "folder:" + w("folder"), "--seed", "2",
               "--save", w("one_folder.safetensors")], timeout=300)
    ok = pair.returncode == 0 and one.returncode == 0
    if ok:
        fa, fb = read_state(w("dp_folder.safetensors")), read_state(w("one_folder.safetensors"))
        worst = worst_relative(fa, {k: fb[k] for k in fb if fb[k].dtype.kind == "f"})
    else:
        worst = float("inf")
        print(pair.stderr, one.stderr)
    check(ok and worst <= 1e-5, f"image folder, 6 steps over 2 epochs: worst difference {worst:.2e} (bound 1e-5)")

    # Batch norm: synchronized statistics, against one process with both batches.
    subprocess.run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", "tiny", "--weights", "none",
                    "--image-size", "16", "--num-classes", "10", "-o", w("tiny.onnx")], check=True,
                   stdout=subprocess.DEVNULL)
    np.save(w("data/images16.npy"), rng.standard_normal((64, 1, 16, 16)).astype(np.float32))
    os.makedirs(w("data16"), exist_ok=True)
    os.replace(w("data/images16.npy"), w("data16/images.npy"))
    np.save(w("data16/labels.npy"), rng.integers(0, 10, 64).astype(np.int64))
    for name, flags in (("sbn", ["--batch", "4", "--data-parallel", "--sync-batch-norm"]),
                        ("pbn", ["--batch", "4", "--data-parallel"]), ("bn8", ["--batch", "8"])):
        subprocess.run([castor, "compile", w("tiny.onnx"), "-o", w(name + ".plan")] + common + flags, check=True,
                       capture_output=True)
    states = {}
    for name, extra in (("sbn", ["--replicas", "2"]), ("pbn", ["--replicas", "2"]), ("bn8", [])):
        r = run([castor_run, "train", w(name + ".plan"), "--steps", "12", "--data", "npy:" + w("data16"), "--seed", "4",
                 "--save", w(name + ".safetensors")] + extra, timeout=300)
        if r.returncode:
            print(r.stderr)
        states[name] = read_state(w(name + ".safetensors")) if r.returncode == 0 else None
    if all(v is not None for v in states.values()):
        ref = {k: v for k, v in states["bn8"].items() if v.dtype.kind == "f"}
        synced, per_replica = worst_relative(states["sbn"], ref), worst_relative(states["pbn"], ref)
        check(synced <= 1e-5 and per_replica > 1e-3,
              f"batch norm, 12 steps: --sync-batch-norm within {synced:.2e} of one process with both batches "
              f"(bound 1e-5), per-replica statistics {per_replica:.2e} away")
    else:
        check(False, "batch norm runs")

    # The same in fp16, batch norm fused with ReLU (batch_norm_relu_training with sync).
    runs = {}
    for name, flags, extra in (("sbn16", ["--batch", "4", "--data-parallel", "--sync-batch-norm"], ["--replicas", "2"]),
                               ("pbn16", ["--batch", "4", "--data-parallel"], ["--replicas", "2"]),
                               ("bn16", ["--batch", "8"], [])):
        subprocess.run([castor, "compile", w("tiny.onnx"), "--precision", "fp16", "-o", w(name + ".plan")] + common +
                       flags, check=True, capture_output=True)
        if os.path.exists(w(name + ".jsonl")):
            os.remove(w(name + ".jsonl"))
        r = run([castor_run, "train", w(name + ".plan"), "--steps", "10", "--data", "npy:" + w("data16"), "--seed",
                 "4", "--log-json", w(name + ".jsonl")] + extra, timeout=300)
        runs[name] = losses(w(name + ".jsonl")) if r.returncode == 0 else None
    if all(runs.values()):
        synced = max(abs(x - y) for x, y in zip(runs["sbn16"], runs["bn16"]))
        per_replica = max(abs(x - y) for x, y in zip(runs["pbn16"], runs["bn16"]))
        check(synced <= 1e-3 < per_replica,
              f"fp16, batch norm fused with ReLU, 10 steps: --sync-batch-norm's losses within {synced:.1e} of one "
              f"process (bound 1e-3), per-replica statistics {per_replica:.1e} away")
    else:
        check(False, "fp16 batch norm runs")

    # 2. Not vacuous: one replica alone (its own shard, no partner) ends elsewhere.
    alone = run([castor_run, "train", w("plain4.plan"), "--steps", str(STEPS), "--data", data, "--save",
                 w("alone.safetensors")], timeout=300)
    gap = worst_relative(read_state(w("alone.safetensors")), {k: b[k] for k in floats}) if alone.returncode == 0 else 0
    check(alone.returncode == 0 and gap > 1e-3, f"a replica training alone differs from the pair by {gap:.2e}")

    # 3. Faults and refusals.
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", WORLD_SIZE="2")
    start = time.monotonic()
    lonely = run([castor_run, "train", w("dp4.plan"), "--steps", "5", "--data", data, "--replica-timeout", "2"],
                 env=dict(env, RANK="0", MASTER_PORT=free_port()), timeout=60)
    took = time.monotonic() - start
    check(lonely.returncode != 0 and "replica 1 did not connect" in lonely.stderr and took < 10,
          f"a replica that never joins: replica 0 stops after {took:.1f} s naming it")

    port = free_port()
    r0 = subprocess.Popen([castor_run, "train", w("dp4.plan"), "--steps", "10000000", "--data", data,
                           "--replica-timeout", "3"], env=dict(env, RANK="0", MASTER_PORT=port),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    r1 = subprocess.Popen([castor_run, "train", w("dp4.plan"), "--steps", "10000000", "--data", data,
                           "--replica-timeout", "3"], env=dict(env, RANK="1", MASTER_PORT=port),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)
    r1.send_signal(signal.SIGKILL)
    start = time.monotonic()
    try:
        _, err = r0.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        r0.kill()
        err = "(still running after 30 s)"
    took = time.monotonic() - start
    r1.wait()
    check(r0.returncode not in (0, None) and "replica 1" in err and took < 10,
          f"a replica killed mid-run: the other stops after {took:.1f} s naming it")

    refused = run([castor_run, "train", w("plain4.plan"), "--replicas", "2", "--steps", "2", "--data", data],
                  timeout=60)
    check(refused.returncode != 0 and "compile it with --data-parallel" in refused.stderr,
          "a plan without all_reduce is refused under two replicas")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
