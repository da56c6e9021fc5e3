#!/usr/bin/env python3
"""Exports a Castor training state back to the model's ecosystem.

  castor-export.py STATE --model model.onnx [--onnx OUT.onnx] [--torch OUT.safetensors]
                   [--optimizer OUT.safetensors]

STATE is what `castor-run train --save` wrote (safetensors: the model's parameters and BN running
statistics under the ONNX initializer names, the optimizer's state, Castor's counters); --model is
the ONNX file the plan was compiled from.

--onnx       the model's graph with its initializers replaced by the trained values, inline, in
             each initializer's own dtype; onnxruntime runs it. --form eval (default):
             BatchNormalization uses the running statistics (training_mode 0); --form train: the
             graph's BatchNormalization as given.
--torch      a checkpoint in PyTorch's state_dict naming (an ONNX file exported from PyTorch keeps
             the state_dict names as initializer names): every trained initializer in float32,
             and for each BatchNormalization `<prefix>.num_batches_tracked` (int64, the training
             steps whose update was applied: a skipped step leaves the running statistics alone), so that `torchvision.models.<arch>().load_state_dict(..., strict=True)`
             takes it (safetensors.torch.load_file reads it).
--optimizer  everything else in the state (momentum, Adam moments, step counters, the loss
             scaler), with the state's metadata.

A parameter of the model that the state lacks is an error naming it.
"""
import argparse
import json
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32,
          "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """{name: array} and the metadata; BF16 widened to float32."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        raw = data[a:b]
        if h["dtype"] == "BF16":
            v = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif h["dtype"] in DTYPES:
            v = np.frombuffer(raw, DTYPES[h["dtype"]])
        else:
            sys.exit(f"{path}: tensor {name} has dtype {h['dtype']}, which this exporter does not read")
        out[name] = v.reshape(h["shape"]).copy()
    return out, meta


def write_safetensors(path, tensors, meta=None):
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64",
             np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8", np.dtype(np.bool_): "BOOL"}
    header, blobs, offset = {}, [], 0
    for name, v in tensors.items():
        v = np.require(v, requirements="C")  # 0-d stays 0-d (num_batches_tracked is a scalar)
        header[name] = {"dtype": names[v.dtype], "shape": list(v.shape), "data_offsets": [offset, offset + v.nbytes]}
        blobs.append(v.tobytes())
        offset += v.nbytes
    if meta:
        header["__metadata__"] = {str(k): str(v) for k, v in meta.items()}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("state")
    ap.add_argument("--model", required=True, help="the ONNX model the plan was compiled from")
    ap.add_argument("--onnx", help="write the trained model here (ONNX)")
    ap.add_argument("--form", choices=["eval", "train"], default="eval",
                    help="the ONNX model's BatchNormalization: eval (running statistics, the default) or train "
                         "(batch statistics, as the model was given)")
    ap.add_argument("--torch", help="write a PyTorch state_dict checkpoint here (safetensors)")
    ap.add_argument("--optimizer", help="write the optimizer's state here (safetensors)")
    a = ap.parse_args()
    if not (a.onnx or a.torch or a.optimizer):
        sys.exit("nothing to write: give --onnx, --torch and/or --optimizer")
    state, meta = read_safetensors(a.state)
    model = onnx.load(a.model, load_external_data=False)
    graph_inputs = {i.name for i in model.graph.input}
    # The model's parameters: its float initializers (the state holds every one the plan trains or
    # keeps, e.g. BN running statistics, under the same name).
    params = [t for t in model.graph.initializer
              if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                                 onnx.TensorProto.BFLOAT16)]
    missing = [t.name for t in params if t.name not in state]
    if missing:
        sys.exit(f"{a.state} lacks the model's parameter(s) {', '.join(missing[:5])}"
                 f"{' and more' if len(missing) > 5 else ''}: is it a state of a plan compiled from {a.model}?")
    for t in params:
        want = tuple(t.dims)
        if tuple(state[t.name].shape) != want:
            sys.exit(f"parameter {t.name}: the model's shape is {list(want)}, the state's {list(state[t.name].shape)}")
    names = {t.name for t in params}
    if a.onnx:
        if a.form == "eval":
            # BatchNormalization with its running statistics (a model exported from PyTorch in
            # training mode has training_mode=1 and the updated statistics as extra outputs).
            for node in model.graph.node:
                if node.op_type == "BatchNormalization":
                    keep = [at for at in node.attribute if at.name != "training_mode"]
                    del node.attribute[:]
                    node.attribute.extend(keep)
                    del node.output[1:]
        for t in model.graph.initializer:
            if t.name in names:
                dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
                t.CopyFrom(numpy_helper.from_array(state[t.name].astype(dtype), t.name))
        onnx.checker.check_model(model)
        onnx.save(model, a.onnx)
    if a.torch:
        out = {n: state[n].astype(np.float32) for n in (t.name for t in params)}
        # The batches the running statistics took: a skipped step leaves them as they were.
        skipped = int(state["castor.skipped_steps"]) if "castor.skipped_steps" in state else 0
        steps = int(meta.get("castor.step", "0")) - skipped
        for node in model.graph.node:
            if node.op_type == "BatchNormalization" and len(node.input) >= 5:
                prefix = node.input[3].rsplit(".", 1)[0] if node.input[3].endswith(".running_mean") else None
                if prefix:
                    out[prefix + ".num_batches_tracked"] = np.array(steps, np.int64)
        write_safetensors(a.torch, out)
    if a.optimizer:
        rest = {n: v for n, v in state.items() if n not in names and n not in graph_inputs}
        write_safetensors(a.optimizer, rest, meta)
    print(f"exported {len(params)} parameters of {a.model} from {a.state} (step {meta.get('castor.step', '?')})")


if __name__ == "__main__":
    main()
