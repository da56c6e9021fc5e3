"""Castor to PyTorch on the GPU machine: ResNet-18 trained 100 steps by castor-run (CUDA, fp16,
AdamW, synthetic data), exported by castor-export.py to a PyTorch checkpoint, loaded into
torchvision.models.resnet18 with strict=True and evaluated by PyTorch (fp32, no TF32) on the
batch that castor-run infer evaluated with Castor's eval plan; the logits must agree within 1e-3.

Usage: torchvision_roundtrip.py --castor-run BIN --export castor-export.py --plans DIR --out DIR
  DIR holds resnet18.onnx (the graph), r18_rt_train.plan and r18_rt_eval.plan
  (bench/compile_reliability_plans.sh).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import safetensors.torch
import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--castor-run", required=True)
    ap.add_argument("--export", required=True)
    ap.add_argument("--plans", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = "/tmp/torchvision_roundtrip"
    os.makedirs(work, exist_ok=True)
    state, x_path, y_path, ckpt = (os.path.join(work, n) for n in
                                   ("state.safetensors", "x.npy", "castor_logits.npy", "torch.safetensors"))
    subprocess.run([args.castor_run, "train", os.path.join(args.plans, "r18_rt_train.plan"), "--steps",
                    str(args.steps), "--device", "cuda", "--save", state], check=True, stdout=subprocess.DEVNULL)
    x = np.random.default_rng(7).standard_normal((32, 3, 224, 224)).astype(np.float32)
    np.save(x_path, x)
    subprocess.run([args.castor_run, "infer", os.path.join(args.plans, "r18_rt_eval.plan"), "--input", x_path,
                    "--output", y_path, "--weights", state, "--device", "cuda"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    castor_logits = np.load(y_path)
    subprocess.run([sys.executable, args.export, state, "--model", os.path.join(args.plans, "resnet18.onnx"),
                    "--torch", ckpt], check=True, stdout=subprocess.DEVNULL)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = torchvision.models.resnet18(num_classes=1000)
    missing = model.load_state_dict(safetensors.torch.load_file(ckpt), strict=True)
    model = model.cuda().eval()
    with torch.no_grad():
        torch_logits = model(torch.from_numpy(x).cuda()).double().cpu().numpy()
    diff = float(np.abs(torch_logits - castor_logits).max())
    scale = float(np.abs(castor_logits).max())
    result = {"steps": args.steps, "strict_load": str(missing), "max_abs_diff": diff, "max_abs_logit": scale,
              "torch": torch.__version__, "torchvision": torchvision.__version__, "ok": diff <= 1e-3}
    json.dump(result, open(os.path.join(args.out, "roundtrip.json"), "w"), indent=1)
    print(json.dumps(result))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
