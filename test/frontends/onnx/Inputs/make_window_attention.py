"""Writes window_attention.onnx, the pieces of Swin's attention that Castor builds at import:
a Pad whose pads are computed from shapes (zero here), a mask built by ScatterND into a
ConstantOfShape buffer, and a trained bias table read through an index table (Gather at indices
that are no single range). Also pad_nonzero.onnx, a Pad with real padding.

  make_window_attention.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(7)
i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)
f32 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.float32), name)

nodes = [
    # pads = [0, 0, 0, (4 - W % 4) % 4] from the input's shape: zero for W = 8.
    helper.make_node("Shape", ["input"], ["shape"], name="/pad/Shape"),
    helper.make_node("Gather", ["shape", "three"], ["w"], name="/pad/Gather", axis=0),
    helper.make_node("Mod", ["w", "four"], ["w_mod"], name="/pad/Mod"),
    helper.make_node("Sub", ["four", "w_mod"], ["short"], name="/pad/Sub"),
    helper.make_node("Mod", ["short", "four"], ["right"], name="/pad/Mod_1"),
    helper.make_node("Concat", ["zeros7", "right"], ["pads"], name="/pad/Concat", axis=0),
    helper.make_node("Pad", ["input", "pads"], ["padded"], name="/pad/Pad", mode="constant"),
    # mask [4, 8]: zeros, rows 1 and 3 set to -100 by ScatterND with known indices and updates
    # (float initializers are weights, so the updates are a Constant node, as exporters write them).
    helper.make_node("ConstantOfShape", ["mask_shape"], ["buffer"], name="/mask/ConstantOfShape",
                     value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
    helper.make_node("Constant", [], ["updates"], name="/mask/Constant",
                     value=numpy_helper.from_array(np.full((2, 8), -100.0, np.float32), "updates")),
    helper.make_node("ScatterND", ["buffer", "rows", "updates"], ["mask"], name="/mask/ScatterND"),
    # bias [4, 8] = table[index] (index table of 32 entries into 6 rows, repeated and unordered).
    helper.make_node("Gather", ["bias_table", "bias_index"], ["bias_flat"], name="/bias/Gather", axis=0),
    helper.make_node("Reshape", ["bias_flat", "bias_shape"], ["bias"], name="/bias/Reshape"),
    helper.make_node("Add", ["padded", "mask"], ["masked"], name="/attn/Add"),
    helper.make_node("Add", ["masked", "bias"], ["scores"], name="/attn/Add_1"),
    helper.make_node("Softmax", ["scores"], ["probs"], name="/attn/Softmax", axis=-1),
    helper.make_node("Flatten", ["probs"], ["flat"], name="/head/Flatten"),
    helper.make_node("Gemm", ["flat", "head.weight"], ["output"], name="/head/Gemm", transB=1),
]
index = rng.integers(0, 6, size=32)
index[:2] = [5, 0]  # not ascending
inits = [
    i64("three", [3]), i64("four", [4]), i64("zeros7", [0] * 7), i64("mask_shape", [4, 8]),
    i64("rows", [[1], [3]]),
    f32("bias_table", rng.standard_normal((6, 1))), i64("bias_index", index), i64("bias_shape", [4, 8]),
    f32("head.weight", rng.standard_normal((5, 2 * 4 * 8)) * 0.1),
]
graph = helper.make_graph(nodes, "window_attention",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 2, 4, 8])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 5])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model, full_check=True)
onnx.save(model, os.path.join(out, "window_attention.onnx"))

nonzero = helper.make_graph(
    [helper.make_node("Pad", ["input", "pads"], ["output"], name="/pad/Pad", mode="constant")], "pad_nonzero",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 4, 4])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 2, 4, 6])], [i64("pads", [0, 0, 0, 1, 0, 0, 0, 1])])
onnx.save(helper.make_model(nonzero, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "pad_nonzero.onnx"))
