"""Writes layer_scale.onnx, graph only (its weights external data whose file is not written, as
scripts/export_model_zoo.py exports): timm's ConvNeXt layer scale, a [C] parameter reshaped to
[1, C, 1, 1] and multiplied into a convolution's output (the Reshape reads the weight), and
poolformer's, unsqueezed twice to [C, 1, 1].

  make_layer_scale.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

C = 4
nodes = [
    helper.make_node("Conv", ["input", "conv.weight"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
    helper.make_node("Reshape", ["gamma", "shape"], ["g4"], name="/Reshape"),
    helper.make_node("Mul", ["c", "g4"], ["m"], name="/Mul"),
    helper.make_node("Unsqueeze", ["scale", "axes"], ["s2"], name="/Unsqueeze"),
    helper.make_node("Unsqueeze", ["s2", "axes"], ["s3"], name="/Unsqueeze_1"),
    helper.make_node("Mul", ["m", "s3"], ["m2"], name="/Mul_1"),
    helper.make_node("GlobalAveragePool", ["m2"], ["p"], name="/pool"),
    helper.make_node("Flatten", ["p"], ["output"], name="/flatten"),
]
inits = [numpy_helper.from_array(np.zeros((C, 3, 3, 3), np.float32), "conv.weight"),
         numpy_helper.from_array(np.zeros(C, np.float32), "gamma"),
         numpy_helper.from_array(np.zeros(C, np.float32), "scale"),
         numpy_helper.from_array(np.array([1, -1, 1, 1], np.int64), "shape"),
         numpy_helper.from_array(np.array([-1], np.int64), "axes")]
for t in inits[:3]:
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "layer_scale.weights.bin"), ("offset", "0"), ("length", str(4 * int(np.prod(t.dims))))):
        e = t.external_data.add()
        e.key, e.value = k, v
graph = helper.make_graph(nodes, "layer_scale", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", C])], inits)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
