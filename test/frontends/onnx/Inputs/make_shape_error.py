"""Writes a model whose Gemm operands disagree: Flatten gives 12 features, fc expects 10."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

graph = helper.make_graph(
    [
        helper.make_node("Flatten", ["input"], ["flat"], name="/flatten/Flatten"),
        helper.make_node("Gemm", ["flat", "fc.weight"], ["output"], name="/fc/Gemm", transB=1),
    ],
    "shape_error",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 2, 2])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])],
    [numpy_helper.from_array(np.zeros((10, 10), np.float32), "fc.weight")],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
