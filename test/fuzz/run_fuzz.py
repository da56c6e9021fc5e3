"""Generates the fuzzer's seed models with the model generators, then runs the fuzzer."""
import os
import subprocess
import sys

fuzzer, iterations, models, seeds = sys.argv[1:5]
os.makedirs(seeds, exist_ok=True)
py = sys.executable
paths = []
for name, args in [
    ("tiny_resnet", [os.path.join(models, "resnet.py"), "--arch", "tiny"]),
    ("mlp_dropout", [os.path.join(models, "mlp.py"), "--hidden", "16", "--dropout", "0.2", "--sigmoid"]),
    ("tiny_resnet_graph", [os.path.join(models, "resnet.py"), "--arch", "tiny", "--weights", "none"]),
]:
    out = os.path.join(seeds, name + ".onnx")
    subprocess.run([py] + args + ["-o", out], check=True, stdout=subprocess.DEVNULL)
    paths.append(out)
sys.exit(subprocess.run([fuzzer, iterations] + paths).returncode)
