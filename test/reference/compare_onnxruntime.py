"""Forward agreement of castor (CPU reference backend) with onnxruntime on one ONNX model.

Fills every initializer whose data is absent (graph-only fixtures) with seeded random values,
compiles the model with `castor compile`, runs `castor-run infer`, runs onnxruntime on the
same weights and input, and checks ||castor - ort|| / ||ort|| <= the tolerance.

Usage: compare_onnxruntime.py MODEL.onnx --bin BUILD/bin --work DIR [--batch N] [--tol 1e-4]
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper


def fill_weights(model, rng):
    """Gives every external (absent) initializer seeded values of a sensible scale."""
    # Eval-mode exports share equal initializers through Identity nodes: follow them.
    alias = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Identity"}

    def source(name):
        while name in alias:
            name = alias[name]
        return name

    variances = {source(n.input[4]) for n in model.graph.node if n.op_type == "BatchNormalization" and len(n.input) > 4}
    for init in model.graph.initializer:
        if init.data_location != onnx.TensorProto.EXTERNAL:
            continue
        dims = list(init.dims)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
        name = init.name
        # Drawn in float32 and stored in place: VGG's and ViT's hundreds of MB copied once, not four times.
        if name in variances:
            value = rng.random(dims, dtype=np.float32) + np.float32(0.5)
        elif name.endswith("running_mean") or name.endswith("bias") or len(dims) == 1:
            value = rng.random(dims, dtype=np.float32) * np.float32(0.2) - np.float32(0.1)
        else:
            fan_in = int(np.prod(dims[1:])) if len(dims) > 1 else 1
            value = rng.standard_normal(dims, dtype=np.float32) * np.float32(np.sqrt(1.0 / fan_in))
        del init.external_data[:]
        init.data_location = onnx.TensorProto.DEFAULT
        init.raw_data = value.astype(dtype, copy=False).tobytes()


def inference_dropout(model):
    """onnxruntime draws dropout masks at random: compare with dropout as the identity, and with
    stochastic depth (RandomUniformLike -> Less -> Cast -> Div -> Mul) keeping every sample
    unscaled, as Castor's inference form does."""
    for node in model.graph.node:
        if node.op_type == "Dropout":
            del node.input[1:]
    consumers = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    one = numpy_helper.from_array(np.array(1.0, np.float32), "castor_compare_one")
    for node in model.graph.node:
        if node.op_type != "RandomUniformLike":
            continue
        kept = [a for a in node.attribute if a.name not in ("low", "high")]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute("low", 0.0), helper.make_attribute("high", 0.0)])
        # u = 0 < keep probability: every sample kept
        for less in consumers.get(node.output[0], []):
            for cast in consumers.get(less.output[0], []):
                for div in consumers.get(cast.output[0], []):
                    if div.op_type == "Div":
                        div.input[1] = one.name
    if any(n.op_type == "RandomUniformLike" for n in model.graph.node):
        model.graph.initializer.append(one)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import onnxruntime as ort

    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    model = onnx.load(args.model, load_external_data=False)
    fill_weights(model, rng)
    path = os.path.join(args.work, "model.onnx")
    onnx.save(model, path)

    graph_input = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}][0]
    dims = [d.dim_value for d in graph_input.type.tensor_type.shape.dim]
    dims[0] = args.batch
    x = rng.standard_normal(dims).astype(np.float32)
    np.save(os.path.join(args.work, "x.npy"), x)

    plan = os.path.join(args.work, "model.plan")
    t0 = time.time()
    subprocess.run([os.path.join(args.bin, "castor"), "compile", path, "-o", plan, "--batch", str(args.batch)],
                   check=True, stderr=subprocess.DEVNULL)
    run = [os.path.join(args.bin, "castor-run"), "infer", plan, "--input", os.path.join(args.work, "x.npy"),
           "--output", os.path.join(args.work, "y.npy")]
    weights = os.path.join(args.work, "model.weights.safetensors")
    if os.path.exists(weights):
        run += ["--weights", weights]
    subprocess.run(run, check=True, stdout=subprocess.DEVNULL)
    t1 = time.time()
    got = np.load(os.path.join(args.work, "y.npy")).astype(np.float64)

    inference_dropout(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    # Fixed-batch exports (dynamo) declare batch 1: rebuild their input only when it matches.
    want = session.run(None, {graph_input.name: x})[0].astype(np.float64)
    # Relative, or absolute where the reference is all zeros (torchvision's ViT zero-initialises its head).
    scale = np.linalg.norm(want)
    err = np.linalg.norm(got - want) / scale if scale > 0 else np.linalg.norm(got - want)
    ok = got.shape == want.shape and err <= args.tol and np.isfinite(got).all()
    print(f"{os.path.basename(args.model)} batch {args.batch}: relative error {err:.3e} "
          f"(tolerance {args.tol:g}), castor {t1 - t0:.1f} s: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
