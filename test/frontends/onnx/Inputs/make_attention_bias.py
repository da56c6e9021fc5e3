"""Writes attention_bias.onnx: LeViT's and EfficientFormer's attention bias, a trained table
[heads, offsets] read along axis 1 at a constant [N, N] index table with repeats and no order,
added to the scores of the input, then a classifier.

  make_attention_bias.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(3)
heads, tokens, offsets = 2, 4, 5
index = rng.integers(0, offsets, (tokens, tokens)).astype(np.int64)
nodes = [
    helper.make_node("Gather", ["biases", "index"], ["bias"], name="/attn/Gather", axis=1),
    helper.make_node("Add", ["input", "bias"], ["scores"], name="/attn/Add"),
    helper.make_node("Softmax", ["scores"], ["probs"], name="/attn/Softmax", axis=-1),
    helper.make_node("Flatten", ["probs"], ["flat"], name="/flatten"),
    helper.make_node("Gemm", ["flat", "fc.weight"], ["output"], name="/fc/Gemm", transB=1),
]
inits = [numpy_helper.from_array(rng.normal(0, 1, (heads, offsets)).astype(np.float32), "biases"),
         numpy_helper.from_array(index, "index"),
         numpy_helper.from_array(rng.normal(0, 0.3, (3, heads * tokens * tokens)).astype(np.float32), "fc.weight")]
graph = helper.make_graph(nodes, "attention_bias",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", heads, tokens, tokens])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3])], inits)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "attention_bias.onnx"))
