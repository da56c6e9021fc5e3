#!/usr/bin/env python3
"""Small one-op ONNX models against onnxruntime, for the ops whose ONNX node tests cannot run here
(declared opset 22 or 12, or axes fed as graph inputs; allow_list.txt says which) and for the forms
exporters write that the node tests lack. Each model is compiled with `castor compile`, run with
`castor-run infer` on the CPU backend, and its output compared with onnxruntime's as the node tests
compare (np.testing.assert_allclose, rtol 1e-4, atol 1e-5, equal shapes; where onnxruntime cannot
run a form, the case gives the expected outputs itself). Each refused form must
fail to compile with a message naming the node, its op and the reason.

The cases are in op_model_cases.py. Usage: run_op_models.py --bin BUILD/bin --work DIR [--only NAME ...]
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime

import op_model_cases

RTOL = 1e-4
ATOL = 1e-5


def compile_model(bin_dir, model, work):
    os.makedirs(work, exist_ok=True)
    path, plan = os.path.join(work, "model.onnx"), os.path.join(work, "model.plan")
    onnx.save(model, path)
    r = subprocess.run([os.path.join(bin_dir, "castor"), "compile", path, "-o", plan], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    return r.returncode, r.stdout, plan


def run_case(case, bin_dir, work):
    """None when the case holds, else why not."""
    model = case.model()
    if case.refusal is None:  # a refused form need not be valid ONNX (a slope that widens x)
        onnx.checker.check_model(model, full_check=True)
    code, out, plan = compile_model(bin_dir, model, work)
    if case.refusal is not None:
        if code == 0:
            return "compiled, but it must be refused"
        missing = [text for text in case.refusal if text not in out]
        return f"refused without naming {missing}:\n{out}" if missing else None
    if code != 0:
        return f"castor compile failed:\n{out}"
    cmd = [os.path.join(bin_dir, "castor-run"), "infer", plan]
    for name, value in case.feeds.items():
        npy = os.path.join(work, f"in_{name}.npy")
        np.save(npy, value)
        cmd += ["--input", f"{name}={npy}"]
    outputs = [o.name for o in model.graph.output]
    for name in outputs:
        cmd += ["--output", f"{name}={os.path.join(work, f'out_{name}.npy')}"]
    weights = os.path.join(work, "model.weights.safetensors")
    if os.path.exists(weights):
        cmd += ["--weights", weights]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if r.returncode != 0:
        return f"castor-run infer failed:\n{r.stdout}"
    if case.expected is not None:
        expected = case.expected(case.feeds)
    else:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = session.run(outputs, case.feeds)
    for name, want in zip(outputs, expected):
        got = np.load(os.path.join(work, f"out_{name}.npy"))
        if got.shape != want.shape:
            return f"output {name}: shape {got.shape}, onnxruntime's {want.shape}"
        try:
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
        except AssertionError as e:
            return f"output {name} differs from onnxruntime's{e}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    cases = op_model_cases.cases()
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        sys.exit("op_model_cases.py names a case twice")
    failed = 0
    for case in cases:
        if args.only and case.name not in args.only:
            continue
        why = run_case(case, args.bin, os.path.join(args.work, case.name))
        print(f"{'ok  ' if why is None else 'FAIL'} {case.name}" + ("" if why is None else f"\n    {why}"), flush=True)
        failed += why is not None
    print(f"{failed} failed" if failed else "all cases hold")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
