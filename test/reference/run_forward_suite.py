"""castor vs onnxruntime, forward, on every torchvision fixture (train- and eval-mode exports
at batch 1, ResNet-50 also at batch 2) and the bundled ResNet-50."""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

bin_dir, fixtures, work = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
cases = []
for name in sorted(os.listdir(fixtures)):
    if name.endswith(".onnx"):
        cases.append((os.path.join(fixtures, name), 1))
cases.append((os.path.join(fixtures, "resnet50_train.onnx"), 2))
cases.append((os.path.join(fixtures, "resnet50_eval.onnx"), 2))


def run(case):
    path, batch = case
    stem = os.path.splitext(os.path.basename(path))[0]
    out = subprocess.run([sys.executable, os.path.join(here, "compare_onnxruntime.py"), path, "--bin", bin_dir,
                          "--work", os.path.join(work, f"{stem}_b{batch}"), "--batch", str(batch)],
                         capture_output=True, text=True)
    return out.returncode, (out.stdout + out.stderr).strip()


failed = 0
with ThreadPoolExecutor(max_workers=2) as pool:
    for code, text in pool.map(run, cases):
        print(text, flush=True)
        failed += code != 0
print(f"{len(cases) - failed} of {len(cases)} models agree with onnxruntime")
sys.exit(1 if failed else 0)
