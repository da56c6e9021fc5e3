"""Writes models whose reshape targets and scales are computed in the graph, as exporters leave them.

  shape_arithmetic.onnx  Shape/Gather/Div/Unsqueeze/Concat build two reshape targets; a scale
                         1/sqrt(dim) from Shape/Gather/Cast/Sqrt divides the data; Sub by a
                         constant; ConstantOfShape/Range/Equal/Where/Expand/Slice/Mod/Squeeze
                         make an additive offset folded into one constant.
  data_dependent.onnx    Equal on the data itself: cannot be folded, refused with its node named.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out_dir = sys.argv[1]


def const(name, values, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=f"/{name}",
                            value=numpy_helper.from_array(np.array(values, dtype=dtype), name))


nodes = [
    helper.make_node("Shape", ["input"], ["shape"], name="/Shape"),
    const("zero", 0), const("one", 1), const("two", 2), const("axes0", [0]),
    helper.make_node("Gather", ["shape", "zero"], ["n"], name="/Gather_n", axis=0),
    helper.make_node("Gather", ["shape", "one"], ["c"], name="/Gather_c", axis=0),
    helper.make_node("Div", ["c", "two"], ["half"], name="/Div_half"),
    helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="/Unsqueeze_n"),
    helper.make_node("Unsqueeze", ["half", "axes0"], ["half1"], name="/Unsqueeze_half"),
    const("two1", [2]), const("sixteen1", [16]), const("minus1", [-1]),
    helper.make_node("Concat", ["n1", "two1", "half1", "sixteen1"], ["target"], name="/Concat_target", axis=0),
    helper.make_node("Reshape", ["input", "target"], ["split"], name="/Reshape_split"),
    helper.make_node("Concat", ["n1", "minus1"], ["flat_target"], name="/Concat_flat", axis=0),
    helper.make_node("Reshape", ["split", "flat_target"], ["flat"], name="/Reshape_flat"),
    # 1 / sqrt(H): H = 4 from the shape.
    helper.make_node("Gather", ["shape", "two"], ["h"], name="/Gather_h", axis=0),
    helper.make_node("Cast", ["h"], ["hf"], name="/Cast_h", to=TensorProto.FLOAT),
    helper.make_node("Sqrt", ["hf"], ["root"], name="/Sqrt"),
    helper.make_node("Div", ["flat", "root"], ["scaled"], name="/Div_scale"),
    const("bias", 1.5, np.float32),
    helper.make_node("Sub", ["scaled", "bias"], ["shifted"], name="/Sub_bias"),
    # An offset vector [128] built from shape arithmetic: where(i % 2 == 0, 1, -1) over range(128),
    # through ConstantOfShape, Expand, Slice and Squeeze.
    const("len", [128]), const("start", 0), const("limit", 128), const("step", 1),
    helper.make_node("Range", ["start", "limit", "step"], ["idx"], name="/Range"),
    helper.make_node("Mod", ["idx", "two"], ["parity"], name="/Mod"),
    helper.make_node("Equal", ["parity", "zero"], ["even"], name="/Equal"),
    helper.make_node("ConstantOfShape", ["len"], ["ones"], name="/ConstantOfShape",
                     value=numpy_helper.from_array(np.array([1.0], np.float32), "v")),
    helper.make_node("Neg", ["ones"], ["neg_ones"], name="/Neg"),
    helper.make_node("Where", ["even", "ones", "neg_ones"], ["signs"], name="/Where"),
    const("shape2x128", [2, 128]),
    helper.make_node("Expand", ["signs", "shape2x128"], ["signs2"], name="/Expand"),
    const("s0", [1]), const("e0", [2]), const("ax0", [0]),
    helper.make_node("Slice", ["signs2", "s0", "e0", "ax0"], ["signs1"], name="/Slice"),
    helper.make_node("Squeeze", ["signs1", "axes0"], ["offset"], name="/Squeeze"),
    helper.make_node("Add", ["shifted", "offset"], ["output"], name="/Add_offset"),
]
graph = helper.make_graph(nodes, "shape_arithmetic",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 8, 4, 4])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 128])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model, full_check=True)
onnx.save(model, f"{out_dir}/shape_arithmetic.onnx")

graph = helper.make_graph(
    [const("zero_f", 0.0, np.float32),
     helper.make_node("Equal", ["input", "zero_f"], ["mask"], name="/mask/Equal"),
     helper.make_node("Where", ["mask", "input", "input"], ["output"], name="/mask/Where")],
    "data_dependent",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{out_dir}/data_dependent.onnx")
