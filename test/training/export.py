"""The way back: a state trained by castor-run, exported by castor-export.py, runs in onnxruntime
with the logits of `castor-run infer` on Castor's eval plan (within 1e-4), and its PyTorch
checkpoint holds every parameter under the model's names in float32 with num_batches_tracked for
each batch norm; the optimizer's state goes to a file of its own. A state of another model is
refused naming the parameter. Runs in fp32 and in fp16 (fp32 master weights).

Usage: export.py --bin BUILD/bin --models MODELS_DIR --work DIR
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def check(args, precision, model, other_model):
    work = os.path.join(args.work, precision)
    os.makedirs(work, exist_ok=True)
    castor, castor_run = os.path.join(args.bin, "castor"), os.path.join(args.bin, "castor-run")
    export = os.path.join(args.bin, "castor-export.py")
    plan, eval_plan, state = (os.path.join(work, n) for n in ("train.plan", "eval.plan", "state.safetensors"))
    run([castor, "compile", model, "--init", "kaiming", "--batch", "16", "--train", "--optimizer", "sgd", "--lr",
         "0.05", "--momentum", "0.9", "--precision", precision, "-o", plan], stderr=subprocess.DEVNULL)
    run([castor_run, "train", plan, "--steps", "6", "--data", "synthetic", "--classes", "10", "--save", state],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run([castor, "compile", model, "--init", "kaiming", "--batch", "16", "--eval", "-o", eval_plan],
        stderr=subprocess.DEVNULL)
    x = np.random.default_rng(1).standard_normal((16, 1, 32, 32)).astype(np.float32)
    xp, yp = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(xp, x)
    run([castor_run, "infer", eval_plan, "--input", xp, "--output", yp, "--weights", state], stderr=subprocess.DEVNULL)
    castor_logits = np.load(yp)
    onnx_out, torch_out, opt_out = (os.path.join(work, n) for n in ("trained.onnx", "torch.safetensors", "opt.safetensors"))
    run([sys.executable, export, state, "--model", model, "--onnx", onnx_out, "--torch", torch_out, "--optimizer",
         opt_out], stdout=subprocess.DEVNULL)
    session = ort.InferenceSession(onnx_out, providers=["CPUExecutionProvider"])
    ort_logits = session.run(None, {session.get_inputs()[0].name: x})[0]
    diff = float(np.abs(ort_logits - castor_logits).max())
    ok = diff <= 1e-4
    print(f"{precision}: onnxruntime against castor-run infer, max |diff| {diff:.2e} (<= 1e-4: {ok})", flush=True)
    m = onnx.load(model, load_external_data=False)
    params = {t.name: list(t.dims) for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    bns = [n.input[3].rsplit(".", 1)[0] for n in m.graph.node if n.op_type == "BatchNormalization"]
    h = header(torch_out)
    want = set(params) | {b + ".num_batches_tracked" for b in bns}
    names_ok = set(h) == want
    dtypes_ok = all(h[n]["dtype"] == "F32" and h[n]["shape"] == s for n, s in params.items())
    counters_ok = all(h[b + ".num_batches_tracked"]["dtype"] == "I64" and h[b + ".num_batches_tracked"]["shape"] == []
                      for b in bns)
    print(f"{precision}: PyTorch checkpoint names {names_ok}, float32 shapes {dtypes_ok}, num_batches_tracked "
          f"{counters_ok} ({len(bns)} batch norms)", flush=True)
    o = header(opt_out)
    opt_ok = all(n + ".momentum_buffer" in o for n in params if "running" not in n) and \
        o["__metadata__"].get("castor.step") == "6" and not (set(o) & set(params))
    print(f"{precision}: optimizer state apart {opt_ok}", flush=True)
    refused = subprocess.run([sys.executable, export, state, "--model", other_model, "--onnx",
                              os.path.join(work, "wrong.onnx")], capture_output=True, text=True)
    refusal_ok = refused.returncode != 0 and "fc.weight" in refused.stderr
    print(f"{precision}: a state of another model refused naming the parameter {refusal_ok} "
          f"({refused.stderr.strip()[:120]})", flush=True)
    return ok and names_ok and dtypes_ok and counters_ok and opt_ok and refusal_ok


def main():
    ap = argparse.ArgumentParser()
    for a in ("--bin", "--models", "--work"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model, other = os.path.join(args.work, "tiny.onnx"), os.path.join(args.work, "tiny4.onnx")
    run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", "tiny", "--weights", "none",
         "--image-size", "32", "-o", model], stdout=subprocess.DEVNULL)
    run([sys.executable, os.path.join(args.models, "resnet.py"), "--arch", "tiny", "--weights", "none",
         "--image-size", "32", "--num-classes", "4", "-o", other], stdout=subprocess.DEVNULL)
    ok = all([check(args, p, model, other) for p in ("fp32", "fp16")])
    print("ok" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
