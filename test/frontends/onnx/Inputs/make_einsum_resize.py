"""Writes einsum_attention.onnx (attention written as Einsum: NCHW to tokens by a permutation,
q, k and v by [out, in] weights, heads split by a permutation, scores and weighted values per
batch and head, then a classifier) and fpn_bilinear.onnx (a low-resolution branch upsampled
bilinearly by 2, as F.interpolate(mode="bilinear") exports it, added to a high-resolution one,
then pooled and classified).

  make_einsum_resize.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(5)


def weight(name, shape, scale=0.3):
    return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def save(name, nodes, inits, input_shape, classes):
    graph = helper.make_graph(nodes, name.split(".")[0],
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, input_shape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", classes])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, name))


dim, heads = 8, 2
E = lambda ins, outs, eq, name: helper.make_node("Einsum", ins, [outs], name=name, equation=eq)
nodes = [
    helper.make_node("Conv", ["input", "patch.weight"], ["patches"], name="/patch/Conv", strides=[2, 2],
                     kernel_shape=[2, 2]),
    E(["patches"], "nhwc", "bchw->bhwc", "/tokens/Einsum"),
    helper.make_node("Reshape", ["nhwc", "tokens_shape"], ["tokens"], name="/tokens/Reshape"),
]
for p in "qkv":
    nodes += [E(["tokens", f"{p}.weight"], p, "bnc,dc->bnd", f"/attn/{p}/Einsum"),
              helper.make_node("Reshape", [p, "heads_shape"], [f"{p}_split"], name=f"/attn/{p}/Reshape"),
              E([f"{p}_split"], f"{p}_heads", "bnhd->bhnd", f"/attn/{p}/heads")]
nodes += [
    E(["q_heads", "k_heads"], "scores", "bhid,bhjd->bhij", "/attn/scores"),
    helper.make_node("Softmax", ["scores"], ["probs"], name="/attn/Softmax", axis=-1),
    E(["probs", "v_heads"], "mixed", "bhij,bhjd->bhid", "/attn/values"),
    E(["mixed"], "merged", "bhnd->bnhd", "/attn/merge"),
    helper.make_node("Flatten", ["merged"], ["flat"], name="/flatten"),
    helper.make_node("Gemm", ["flat", "fc.weight"], ["output"], name="/fc/Gemm", transB=1),
]
inits = [weight("patch.weight", [dim, 3, 2, 2]), ints("tokens_shape", [0, 4, dim]),
         ints("heads_shape", [0, 4, heads, dim // heads]), weight("fc.weight", [3, 4 * dim])]
inits += [weight(f"{p}.weight", [dim, dim]) for p in "qkv"]
save("einsum_attention.onnx", nodes, inits, ["batch", 3, 4, 4], 3)

nodes = [
    helper.make_node("Conv", ["input", "hi.weight"], ["hi"], name="/hi/Conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    helper.make_node("Conv", ["input", "lo.weight"], ["lo"], name="/lo/Conv", strides=[2, 2], pads=[1, 1, 1, 1],
                     kernel_shape=[3, 3]),
    helper.make_node("Resize", ["lo", "", "scales"], ["up"], name="/up/Resize", mode="linear",
                     coordinate_transformation_mode="pytorch_half_pixel"),
    helper.make_node("Add", ["hi", "up"], ["sum"], name="/Add"),
    helper.make_node("GlobalAveragePool", ["sum"], ["pooled"], name="/pool"),
    helper.make_node("Flatten", ["pooled"], ["flat"], name="/flatten"),
    helper.make_node("Gemm", ["flat", "fc.weight"], ["output"], name="/fc/Gemm", transB=1),
]
inits = [weight("hi.weight", [4, 3, 3, 3]), weight("lo.weight", [4, 3, 3, 3]), weight("fc.weight", [3, 4]),
         numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
save("fpn_bilinear.onnx", nodes, inits, ["batch", 3, 8, 8], 3)
