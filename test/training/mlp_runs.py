"""Shared by the training tests: compile the small MLP into training plans, train them with
castor-run on synthetic data, and read back the saved state."""
import json
import os
import struct
import subprocess
import sys

import numpy as np


def read_state(path):
    """The tensors of a safetensors file (bf16 as raw uint16), by name."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    types = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "BF16": np.uint16}
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], types[v["dtype"]]).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def compile_mlp(castor, models, work, hidden, flags=()):
    """models/mlp.py --hidden `hidden` compiled into an AdamW training plan in `work`; its path."""
    os.makedirs(work, exist_ok=True)
    model, plan = os.path.join(work, f"mlp{hidden}.onnx"), os.path.join(work, f"mlp{hidden}.plan")
    subprocess.run([sys.executable, os.path.join(models, "mlp.py"), "--hidden", str(hidden), "--weights", "none", "-o",
                    model], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([castor, "compile", model, "--init", "kaiming", "--train", "--batch", "8", "--optimizer", "adamw",
                    "-o", plan] + list(flags), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return plan


class MlpRuns:
    """Trains `models/mlp.py --hidden 32` with `compile_flags` common to every run."""

    def __init__(self, bin_dir, models, work, compile_flags, seed):
        self.bin, self.work, self.flags, self.seed = bin_dir, work, compile_flags, seed
        os.makedirs(work, exist_ok=True)
        self.model = os.path.join(work, "mlp.onnx")
        subprocess.run([sys.executable, os.path.join(models, "mlp.py"), "--hidden", "32", "--weights", "none", "-o",
                        self.model], check=True, stdout=subprocess.DEVNULL)

    def train(self, name, steps, extra_flags, run_flags=()):
        """Compiles with the common and `extra_flags`, trains `steps` steps (castor-run train with
        `run_flags`), returns the state."""
        plan, state = os.path.join(self.work, name + ".plan"), os.path.join(self.work, name + ".safetensors")
        subprocess.run([os.path.join(self.bin, "castor"), "compile", self.model, "--init", "kaiming", "--train", "-o",
                        plan] + self.flags + extra_flags, check=True, stderr=subprocess.DEVNULL)
        subprocess.run([os.path.join(self.bin, "castor-run"), "train", plan, "--steps", str(steps), "--data",
                        "synthetic", "--seed", str(self.seed), "--save", state] + list(run_flags), check=True,
                       stdout=subprocess.DEVNULL)
        return read_state(state)
