"""Writes an eval-mode export whose initializers the exporter merged: the first convolution's bias
and the BatchNorm's running mean are one zero tensor ("zeros"), its scale and running variance
one tensor of ones ("ones"), as torch.onnx.export's constant folding leaves a fresh DenseNet. A
second BatchNorm reads the same statistics through Identity nodes; an unnamed third reads them
directly. Then global pooling and a classifier (a [N, 4] output, so that it compiles for training)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

C = 4
rng = np.random.default_rng(0)
graph = helper.make_graph(
    [
        helper.make_node("Conv", ["input", "conv.weight", "zeros"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "ones", "zeros", "zeros", "ones"], ["b"], name="/bn/BatchNorm"),
        helper.make_node("Identity", ["zeros"], ["zeros_alias"], name="/Identity"),
        helper.make_node("Identity", ["ones"], ["ones_alias"], name="/Identity_1"),
        helper.make_node("BatchNormalization", ["b", "bn2.weight", "bn2.bias", "zeros_alias", "ones_alias"], ["b2"],
                         name="/bn2/BatchNorm"),
        helper.make_node("BatchNormalization", ["b2", "bn2.weight", "bn2.bias", "zeros", "ones"], ["b3"]),
        helper.make_node("Relu", ["b3"], ["r"], name="/Relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="/pool"),
        helper.make_node("Flatten", ["p"], ["output"], name="/flatten"),
    ],
    "shared_statistics",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", C])],
    [numpy_helper.from_array(rng.normal(0, 0.3, (C, 3, 3, 3)).astype(np.float32), "conv.weight"),
     numpy_helper.from_array(np.zeros(C, np.float32), "zeros"),
     numpy_helper.from_array(np.ones(C, np.float32), "ones"),
     numpy_helper.from_array(np.full(C, 1.5, np.float32), "bn2.weight"),
     numpy_helper.from_array(np.full(C, 0.25, np.float32), "bn2.bias")],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
