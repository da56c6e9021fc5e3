"""A disk that fills up while castor-run train saves: the write fails with a clear message naming
the previous checkpoint, that checkpoint stays loadable and resumes, no temporary file is left.

The checkpoints go to a tmpfs just large enough for one (mounted directly when running as root,
else in a user namespace with `unshare -rm`). Where neither is allowed, a file-size limit
(RLIMIT_FSIZE, with SIGXFSZ ignored) makes the same write fail with EFBIG instead of ENOSPC; the
output says which was used.

Usage: full_disk.py --castor-run BIN (--plan PLAN | --castor BIN --models DIR) --work DIR
                    [--device cpu|cuda] [--method auto|limit]
"""
import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_runs import compile_mlp, read_state  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--castor-run", required=True)
    ap.add_argument("--plan", help="a training plan (else --castor and --models compile the MLP)")
    ap.add_argument("--castor")
    ap.add_argument("--models")
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--method", choices=["auto", "limit"], default="auto",
                    help="limit: the file-size limit even where a tmpfs could be mounted")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    if not args.plan:
        args.plan = compile_mlp(args.castor, args.models, args.work, 256)
    failures = []

    def expect(ok, what):
        print(("ok      " if ok else "FAILED  ") + what)
        if not ok:
            failures.append(what)

    # The step-1 state is compared bit for bit across runs: on a GPU that takes --deterministic.
    train = [args.castor_run, "train", args.plan, "--device", args.device, "--seed", "3"] + \
        (["--deterministic"] if args.device != "cpu" else [])
    # The size of one checkpoint, and the state after step 1 for comparison.
    reference = os.path.join(args.work, "reference.safetensors")
    subprocess.run(train + ["--steps", "1", "--save", reference], check=True, capture_output=True)
    size = os.path.getsize(reference)
    # Room for one checkpoint and a part of the next (a save writes a temporary file beside the
    # old one and renames it over it).
    room = (size * 3 // 2 + 4095) // 4096 * 4096

    disk = os.path.join(args.work, "disk")
    os.makedirs(disk)
    state = os.path.join(disk, "state.safetensors")
    run = train + ["--steps", "3", "--save-every", "1", "--save", state]
    mount = f"mount -t tmpfs -o size={room} tmpfs {disk}"
    how, result = None, None
    if args.method == "auto" and os.geteuid() == 0 and subprocess.run(mount.split(), capture_output=True).returncode == 0:
        how = f"a tmpfs of {room} bytes (ENOSPC)"
        try:
            result = subprocess.run(run, capture_output=True, text=True)
            checkpoint = os.path.join(args.work, "kept.safetensors")
            leftovers = [f for f in os.listdir(disk) if f != "state.safetensors"]
            if os.path.exists(state):
                shutil.copy(state, checkpoint)
        finally:
            subprocess.run(["umount", disk], check=True)
    else:
        script = f"{mount} && cd {args.work} && " + " ".join(run) + "; rc=$?; ls " + disk + " >&2; " + \
            f"cp {state} {args.work}/kept.safetensors 2>/dev/null; exit $rc"
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"{mount} && umount {disk}"], capture_output=True) \
            if args.method == "auto" and shutil.which("unshare") else None
        if probe is not None and probe.returncode == 0:
            how = f"a tmpfs of {room} bytes in a user namespace (ENOSPC)"
            result = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True)
            listed = result.stderr.strip().splitlines()
            leftovers = [f for f in listed[-3:] if f.startswith("state.safetensors.tmp")]
        else:
            how = f"a file-size limit of {size // 2} bytes (EFBIG; no tmpfs mounted)"

            def limit_below():
                # Below one checkpoint's size: the next save fails (EFBIG, not a signal).
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, size // 2))

            # Step 1 saves under no limit; then steps 2..3 resume from it under a limit.
            subprocess.run(train + ["--steps", "1", "--save", state], check=True, capture_output=True)
            result = subprocess.run(train + ["--steps", "2", "--save-every", "1", "--save", state, "--resume", state],
                                    capture_output=True, text=True, preexec_fn=limit_below)
            if os.path.exists(state):
                shutil.copy(state, os.path.join(args.work, "kept.safetensors"))
            leftovers = [f for f in os.listdir(disk) if f != "state.safetensors"]
    print(f"disk: {how}; one checkpoint is {size} bytes")
    message = result.stderr.strip().splitlines()
    message = next((m for m in message if "castor-run: error" in m), "")
    print(f"        {message}")
    expect(result.returncode != 0, "the run fails when the disk is full")
    expect("failed (writing" in message and ("No space left" in message or "File too large" in message),
           "the message says the save failed and why")
    expect(("the last checkpoint" in message and "holds step 1" in message) or
           (how.startswith("a file-size") and "from before is untouched" in message),
           "the message names the previous checkpoint (and its step when this run wrote it)")
    kept = os.path.join(args.work, "kept.safetensors")
    if os.path.exists(kept):
        a, b = read_state(reference), read_state(kept)
        expect(a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a),
               "the previous checkpoint is intact: the state after step 1, bit-identical")
        resumed = subprocess.run(train + ["--steps", "1", "--resume", kept], capture_output=True, text=True)
        expect(resumed.returncode == 0, "the previous checkpoint resumes")
    else:
        expect(False, "the previous checkpoint exists")
    expect(not leftovers, f"no temporary file is left beside it ({leftovers})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
