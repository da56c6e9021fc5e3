#!/usr/bin/env python3
"""Writes gradcheck's miniature ViT block (test/gradcheck/gradcheck.py: patch conv, class token,
layer norm, two-head attention with softmax, GELU in the exporter's erf form, drop path) in
float32, for the GPU agreement test's transformer plans (scripts/build_gpu.sh compiles it in
fp32, fp16 and bf16). With --dim 32 the heads are 16 wide, and fp16 and bf16 steps fuse the
attention (castor-fuse-attention, cuDNN's fused attention on the GPU).

  make_tiny_transformer.py OUT.onnx [--dim D]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gradcheck"))
import gradcheck  # noqa: E402


def to_float32(model):
    """Every float64 tensor, value type and dtype attribute of the model becomes float32."""
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.DOUBLE:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.DOUBLE:
            v.type.tensor_type.elem_type = TensorProto.FLOAT
    for n in g.node:
        for a in n.attribute:
            if a.name in ("to", "dtype") and a.i == TensorProto.DOUBLE:
                a.i = TensorProto.FLOAT
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.DOUBLE:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--dim", type=int, default=4, help="features per token (two heads)")
    args = ap.parse_args()
    model = to_float32(gradcheck.transformer(np.random.default_rng(20261202), dim=args.dim))
    onnx.checker.check_model(model)
    onnx.save(model, args.out)


if __name__ == "__main__":
    main()
