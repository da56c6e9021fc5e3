"""kill -9 at random points of a run that saves after every step: every state left behind loads,
holds a whole step, and resumes.

Each round starts `castor-run train --save-every 1` (resuming from the last round's state when
there is one), waits a random time after the state file first changes, and kills the process
with SIGKILL. The state must then read as a safetensors file with a step count no lower than the
last one seen, and `castor-run train --resume` must take one more step from it. With a state of
tens of megabytes most of the time goes into writing it, so most kills land inside a save.

Usage: kill_resume.py --castor-run BIN (--plan PLAN | --castor BIN --models DIR) --work DIR
                      [--kills N] [--device cpu|cuda]
                      [--seed S] [--json FILE]
"""
import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_runs import compile_mlp  # noqa: E402


def saved_step(path):
    """castor.step of a training state; raises on a truncated or corrupt file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    if 8 + n + end != len(data):
        raise ValueError(f"{len(data)} bytes, the header describes {8 + n + end}")
    return int(header["__metadata__"]["castor.step"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--castor-run", required=True)
    ap.add_argument("--plan", help="a training plan (else --castor and --models compile the MLP)")
    ap.add_argument("--castor")
    ap.add_argument("--models")
    ap.add_argument("--work", required=True)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--check-device", help="the device of the resume check (default: --device); a state "
                    "file is the same whichever backend wrote it")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", help="write the counts here")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed} (--seed {seed} repeats the kill times)")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    if not args.plan:
        args.plan = compile_mlp(args.castor, args.models, args.work, 4096)
    state = os.path.join(args.work, "state.safetensors")
    train = [args.castor_run, "train", args.plan, "--device", args.device, "--seed", "1"]
    failures, last_step, kills, steps_seen, started = [], 0, 0, [], time.time()
    while kills < args.kills:
        cmd = train + ["--steps", "1000000", "--save-every", "1", "--save", state]
        if os.path.exists(state):
            cmd += ["--resume", state]
        before = os.stat(state).st_mtime_ns if os.path.exists(state) else None
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Wait for the first save of this round, then a random time more.
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if os.path.exists(state) and os.stat(state).st_mtime_ns != before:
                break
            time.sleep(0.005)
        if proc.poll() is not None:
            failures.append(f"round {kills + 1}: castor-run ended by itself: {proc.stderr.read().decode()[-300:]}")
            break
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        try:
            step = saved_step(state)
        except Exception as e:  # noqa: BLE001 - any failure to read is the finding
            failures.append(f"kill {kills}: the state does not read: {e}")
            break
        if step < last_step:
            failures.append(f"kill {kills}: the state went back from step {last_step} to {step}")
        last_step = step
        steps_seen.append(step)
        check_device = args.check_device or args.device
        check = subprocess.run([args.castor_run, "train", args.plan, "--device", check_device, "--seed", "1",
                                "--steps", "1", "--resume", state, "--save",
                                        os.path.join(args.work, "check.safetensors")],
                               capture_output=True, text=True)
        if check.returncode != 0:
            failures.append(f"kill {kills}: the state at step {step} does not resume: {check.stderr[-300:]}")
        if args.json:  # progress so far, in case the run is cut short
            with open(args.json, "w") as f:
                json.dump({"kills": kills, "failures": failures, "last_step": last_step, "finished": False}, f)
    leftovers = [f for f in os.listdir(args.work) if ".tmp." in f]
    seconds = time.time() - started
    print(f"{kills} kills in {seconds:.0f} s; the state advanced to step {last_step}; "
          f"{len(failures)} failures; {len(leftovers)} temporary files of interrupted saves left beside the state")
    for f in failures:
        print("FAILED  " + f)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kills": kills, "resumable": kills - len(failures), "failures": failures,
                       "last_step": last_step, "seconds": round(seconds, 1), "device": args.device,
                       "leftover_temporary_files": len(leftovers), "seed": seed, "finished": True}, f, indent=1)
    ok = not failures and kills == args.kills and len(set(steps_seen)) > 1
    print(("ok      " if ok else "FAILED  ") + f"every one of {kills} killed runs left a state that loads and resumes")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
