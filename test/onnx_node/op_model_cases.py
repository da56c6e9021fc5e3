"""The cases of run_op_models.py: one-op (or few-op) ONNX models with their inputs, or a form the
importer must refuse with the texts its message must hold."""
import glob
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
OPSET = 21  # the newest opset Castor imports


@dataclass
class Case:
    name: str
    model: Callable
    feeds: Dict[str, np.ndarray]
    refusal: Optional[List[str]] = None  # texts the compile error must contain
    # The expected outputs from the feeds, where onnxruntime cannot give them.
    expected: Optional[Callable] = None


def graph_model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    """inputs/outputs: {name: shape}, a shape None for one left to shape inference; initializers:
    {name: array}."""
    graph = helper.make_graph(nodes, "op_model", [helper.make_tensor_value_info(n, F, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, F, s) for n, s in outputs.items()],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in dict(initializers).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def unary_case(name, op, x, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name=f"/{op}_0", **attrs)
    return Case(name, lambda: graph_model([node], {"x": list(x.shape)}, {"y": list(x.shape)}), {"x": x})


def activation_input(rng):
    """Values over the range that matters, and the tails where a naive formula overflows or
    cancels (softplus's exp(x) above 88, exp(x) - 1 near 0)."""
    x = (rng.standard_normal((2, 3, 8)) * 4).astype(np.float32)
    special = np.array([-100, -30, -20, -1e-3, 0, 1e-3, 20, 30, 100, 88, 89, -88, 1e-6, -1e-6, 5, -5], np.float32)
    x.reshape(-1)[:special.size] = special
    return x


def activation_cases(rng):
    x = activation_input(rng)
    return [
        unary_case("elu_default", "Elu", x),
        unary_case("elu_alpha", "Elu", x, alpha=0.5),
        unary_case("selu_default", "Selu", x),
        unary_case("selu_attrs", "Selu", x, alpha=2.0, gamma=0.5),
        unary_case("celu_default", "Celu", x),
        unary_case("celu_alpha", "Celu", x, alpha=2.5),
        unary_case("softplus", "Softplus", x),
        unary_case("mish", "Mish", x),
        unary_case("softsign", "Softsign", x),
        Case("celu_zero_alpha_refused",
             lambda: graph_model([helper.make_node("Celu", ["x"], ["y"], name="/Celu_0", alpha=0.0)],
                                 {"x": [2]}, {"y": [2]}), {},
             refusal=["/Celu_0", "Celu", "alpha must be non-zero"]),
    ]


def prelu_case(name, x, slope):
    """PRelu with its slope a trained initializer, as PyTorch's nn.PReLU exports it."""
    node = helper.make_node("PRelu", ["x", "slope"], ["y"], name="/PRelu_0")
    return Case(name, lambda: graph_model([node], {"x": list(x.shape)}, {"y": list(x.shape)}, {"slope": slope}),
                {"x": x})


def prelu_cases(rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x[0, 0, 0, :3] = [0.0, -0.0, -1e-30]
    per_channel = rng.uniform(-0.5, 0.5, (3, 1, 1)).astype(np.float32)
    return [
        prelu_case("prelu_per_channel", x, per_channel),
        prelu_case("prelu_shared", x, np.array([0.25], np.float32)),
        prelu_case("prelu_full", x, rng.uniform(-1, 1, x.shape).astype(np.float32)),
        Case("prelu_widening_slope_refused",
             lambda: graph_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="/PRelu_0")],
                                 {"x": [3, 4]}, {"y": [2, 3, 4]}, {"slope": np.ones((2, 1, 1), np.float32)}), {},
             refusal=["/PRelu_0", "PRelu", "the slope's shape [2, 1, 1] does not broadcast to the input's [3, 4]"]),
    ]


REDUCE_NUMPY = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max,
                "ReduceL2": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims))}


def reduce_case(op, x, axes, keepdims, opset=OPSET, noop=None):
    """`axes` None: none given. From ReduceSum's opset 13 and the others' opset 18 the axes are
    input 1 (a constant initializer), before that the attribute."""
    as_input = opset >= (13 if op == "ReduceSum" else 18)
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs, inits = ["x"], {}
    if axes is not None and as_input:
        inputs.append("axes")
        inits["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        attrs["axes"] = axes
    if noop and axes is None:
        shape = x.shape
    else:
        shape = REDUCE_NUMPY[op](x, axis=None if axes is None else tuple(axes), keepdims=bool(keepdims)).shape
    node = helper.make_node(op, inputs, ["y"], name=f"/{op}_0", **attrs)
    axes_name = "all" if axes is None else "_".join(str(a).replace("-", "m") for a in axes)
    name = f"{op}_axes_{axes_name}_keepdims{keepdims}_opset{opset}" + ("_noop" if noop else "")
    # onnxruntime 1.20 fails on noop_with_empty_axes without axes; ONNX says the output is the input.
    expected = (lambda feeds: [feeds["x"]]) if noop and axes is None else None
    return Case(name, lambda: graph_model([node], {"x": list(x.shape)}, {"y": list(shape)}, inits, opset), {"x": x},
                expected=expected)


def reduce_cases(rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    tokens = rng.standard_normal((2, 49, 16)).astype(np.float32)  # MLP-Mixer's [N, tokens, channels]
    cases = []
    for op in REDUCE_NUMPY:
        for opset in (13, OPSET):
            cases += [reduce_case(op, x, [1], 1, opset), reduce_case(op, x, [-1], 0, opset),
                      reduce_case(op, x, [0, 2], 1, opset), reduce_case(op, x, [2, 3], 0, opset),
                      reduce_case(op, x, [3, 1], 0, opset), reduce_case(op, x, None, 0, opset),
                      reduce_case(op, x, None, 1, opset)]
        cases += [reduce_case(op, tokens, [1], 0), reduce_case(op, tokens, [-1], 1),
                  reduce_case(op, x, None, 1, noop=1), reduce_case(op, x, [1], 0, noop=1)]

    def refused(name, inputs, inits, graph_inputs, reason, **attrs):
        node = helper.make_node("ReduceMax", inputs, ["y"], name="/ReduceMax_0", **attrs)
        return Case(name, lambda: graph_model([node], graph_inputs, {"y": [2]}, inits), {},
                    refusal=["/ReduceMax_0", "ReduceMax", reason])

    cases += [
        refused("reduce_axes_from_data_refused", ["x", "axes"], {}, {"x": [2, 3], "axes": [1]},
                "input 1 ('axes') must be a constant"),
        refused("reduce_repeated_axis_refused", ["x", "axes"], {"axes": np.array([1, -1], np.int64)}, {"x": [2, 3]},
                "axis -1 is repeated"),
        refused("reduce_axis_out_of_range_refused", ["x", "axes"], {"axes": np.array([2], np.int64)}, {"x": [2, 3]},
                "axis 2 is out of range for an input of rank 2"),
    ]
    return cases


def conv1d_case(name, x_shape, w_shape, bias, rng, refusal=None, **attrs):
    x = rng.standard_normal(x_shape).astype(np.float32)
    inits = {"w": (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = rng.uniform(-0.1, 0.1, w_shape[0]).astype(np.float32)
        inputs.append("b")
    node = helper.make_node("Conv", inputs, ["y"], name="/Conv_0", **attrs)
    # The output's shape from onnx's shape inference (graph_model leaves it unknown for it).
    def model():
        m = graph_model([node], {"x": list(x_shape)}, {"y": None}, inits)
        return onnx.shape_inference.infer_shapes(m, strict_mode=True) if refusal is None else m
    return Case(name, model, {"x": x}, refusal=refusal)


def conv1d_cases(rng):
    return [
        # ECA's channel attention: Conv1d(1, 1, k, padding=(k - 1) // 2, bias=False) over [N, 1, C].
        conv1d_case("conv1d_eca", (2, 1, 64), (1, 1, 5), False, rng, pads=[2, 2]),
        conv1d_case("conv1d_eca_default_attrs", (2, 1, 16), (1, 1, 3), False, rng),
        conv1d_case("conv1d_groups_stride_dilation_bias", (2, 4, 19), (6, 2, 3), True, rng, group=2,
                    strides=[2], dilations=[2], pads=[2, 1], kernel_shape=[3]),
        conv1d_case("conv1d_valid", (1, 3, 10), (2, 3, 4), True, rng, auto_pad="VALID"),
        conv1d_case("conv1d_same_upper_refused", (1, 3, 10), (2, 3, 4), False, rng, auto_pad="SAME_UPPER",
                    refusal=["/Conv_0", "Conv", "auto_pad=SAME_UPPER is not supported"]),
        conv1d_case("conv1d_2d_pads_refused", (1, 3, 10), (2, 3, 3), False, rng, pads=[1, 1, 1, 1],
                    refusal=["/Conv_0", "Conv", "a 1-D convolution takes 2 pads, 1 stride, 1 dilation and 1 kernel size "
                                                "(given 4, 1, 1, 1)"]),
        conv1d_case("conv1d_on_2d_input_refused", (1, 3, 4, 10), (2, 3, 3), False, rng,
                    refusal=["/Conv_0", "Conv", "a 1-D filter needs an input [N, C, L], not one of rank 4"]),
    ]


def node_test_dir(name):
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node", name)


def read_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def node_test_with_constant_axes(name):
    """ONNX's node test `name`, whose second input (a reduction's axes, Split's sizes) is a graph
    input, with that input made an initializer (as exporters write it) and its own inputs and
    expected outputs."""
    data = os.path.join(node_test_dir(name), "test_data_set_0")
    inputs = [read_tensor(p) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    expected = [read_tensor(p) for p in sorted(glob.glob(os.path.join(data, "output_*.pb")))]
    first = onnx.load(os.path.join(node_test_dir(name), "model.onnx")).graph.input[0].name

    def model():
        m = onnx.load(os.path.join(node_test_dir(name), "model.onnx"))
        axes = m.graph.input[1]
        m.graph.initializer.append(numpy_helper.from_array(inputs[1], axes.name))
        m.graph.input.remove(axes)
        return m

    return Case(name + "_constant_axes", model, {first: inputs[0]}, expected=lambda feeds: expected)


def split_cases(rng):
    """Split as timm's exports write it (ViT's qkv.unbind after a reshape: equal parts of a leading
    axis; CSPNet and Res2Net: sizes along channels), and the forms the importer refuses."""
    x = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)

    def case(name, sizes, axis, outputs, refusal=None, opset=OPSET, **attrs):
        inputs, inits = ["x"], {}
        if sizes is not None:
            inputs.append("split")
            inits["split"] = np.array(sizes, np.int64)
        names = [f"y{i}" for i in range(outputs)]
        node = helper.make_node("Split", inputs, names, name="/Split_0", axis=axis, **attrs)
        # The outputs' shapes: onnx's shape inference, or (for a refused form) unknown rank-4 ones.
        def model():
            m = graph_model([node], {"x": list(x.shape)}, {n: None if refusal is None else ["a", "b", "c", "d"]
                                                           for n in names}, inits, opset)
            return onnx.shape_inference.infer_shapes(m, strict_mode=True) if refusal is None else m
        return Case(name, model, {"x": x}, refusal=refusal)

    return [
        case("split_unbind_axis0", None, 0, 3, num_outputs=3),
        case("split_equal_parts_opset17", None, 3, 5, opset=17),
        case("split_channels_sizes", [1, 3], 2, 2),
        case("split_last_axis_negative", [2, 2, 1], -1, 3),
        case("split_num_outputs_uneven", None, 3, 2, opset=18, num_outputs=2),
        case("split_zero_size_refused", [0, 4], 2, 2,
             refusal=["/Split_0", "Split", "an output of size 0 along axis 2 is not supported"]),
        case("split_sizes_sum_refused", [1, 2], 2, 2,
             refusal=["/Split_0", "Split", "its sizes add up to 3, not the axis' extent 4"]),
        case("split_axis_out_of_range_refused", [1, 3], 4, 2,
             refusal=["/Split_0", "Split", "axis 4 is out of range for an input of rank 4"]),
    ]


# ONNX's node tests of the reductions that feed their axes as a graph input (allow_list.txt
# excludes them for it); empty sets (a dimension of 0) and bool inputs are not Castor tensors.
NODE_TESTS_WITH_AXES_INPUT = [
    f"test_reduce_{op}_{form}_{data}"
    for op in ("l2", "max", "mean", "sum")
    for form in ("do_not_keepdims", "keepdims" if op != "l2" else "keep_dims",
                 "negative_axes_keepdims" if op != "l2" else "negative_axes_keep_dims")
    for data in ("example", "random")
] + [f"test_reduce_{op}_default_axes_keepdims_{data}" for op in ("l2", "mean", "sum") for data in ("example", "random")] + [
    "test_reduce_sum_empty_axes_input_noop", "test_reduce_sum_empty_axes_input_noop_example"] + [
    f"test_reduce_sum_square_{form}_{data}_expanded"
    for form in ("default_axes_keepdims", "do_not_keepdims", "keepdims", "negative_axes_keepdims")
    for data in ("example", "random")] + [
    # Split's node tests whose sizes are a graph input.
    f"test_split_variable_parts_{form}_opset{v}" for form in ("1d", "2d", "default_axis") for v in (13, 18)] + [
    # Resize's node tests of nearest upsampling by integer factors, whose scales are a graph input.
    "test_resize_upsample_scales_nearest", "test_resize_upsample_scales_nearest_axes_2_3",
    "test_resize_upsample_scales_nearest_axes_3_2",
    # Tile's node tests, whose repeats are a graph input.
    "test_tile", "test_tile_precomputed"]


def pad_cases(rng):
    """Pad in constant mode with zeros as timm's TF-style SAME padding exports it (bottom and right
    by one, the pads folded at import), on every side, with the axes input (opset 18); and the forms
    refused: a crop, another value, another mode."""
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)

    def case(name, pads, value=None, axes=None, mode="constant", refusal=None, opset=OPSET):
        inits = {"pads": np.array(pads, np.int64)}
        inputs = ["x", "pads"]
        if value is not None or axes is not None:
            inputs.append("value" if value is not None else "")
            if value is not None:
                inits["value"] = np.array(value, np.float32)
        if axes is not None:
            inputs.append("axes")
            inits["axes"] = np.array(axes, np.int64)
        node = helper.make_node("Pad", inputs, ["y"], name="/Pad_0", mode=mode)

        def model():
            m = graph_model([node], {"x": list(x.shape)}, {"y": None if refusal is None else ["a", "b", "c", "d"]},
                            inits, opset)
            return onnx.shape_inference.infer_shapes(m, strict_mode=True) if refusal is None else m
        return Case(name, model, {"x": x}, refusal=refusal)

    def from_shape():
        """timm's pad_same: the pads computed from the input's shape, clamped at 0 by Clip (folded
        at import): here max(6 - H, 0) = 1 after H and W."""
        nodes = [helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Gather", ["s", "two"], ["h"], axis=0),
                 helper.make_node("Sub", ["six", "h"], ["d"]),
                 helper.make_node("Clip", ["d", "zero"], ["c"]),
                 helper.make_node("Unsqueeze", ["c", "axis0"], ["cu"]),
                 helper.make_node("Concat", ["zeros6", "cu", "cu"], ["pads"], axis=0),
                 helper.make_node("Pad", ["x", "pads"], ["y"], name="/Pad_0")]
        inits = {"two": np.array(2, np.int64), "six": np.array(6, np.int64), "zero": np.array(0, np.int64),
                 "axis0": np.array([0], np.int64), "zeros6": np.zeros(6, np.int64)}
        m = graph_model(nodes, {"x": list(x.shape)}, {"y": None}, inits)
        return onnx.shape_inference.infer_shapes(m, strict_mode=True)

    return [
        Case("pad_same_pads_from_shape_clip", from_shape, {"x": x}),
        case("pad_same_bottom_right", [0, 0, 0, 0, 0, 0, 1, 1]),
        case("pad_every_side", [0, 1, 2, 3, 1, 0, 2, 1], value=0.0),
        case("pad_axes_opset18", [1, 2, 0, 3], axes=[2, -1]),
        case("pad_negative_refused", [0, 0, 0, 0, 0, 0, -1, 1],
             refusal=["/Pad_0", "Pad", "Pad with negative pads [0, 0, 0, 0, 0, 0, -1...] (a crop) is not supported"]),
        case("pad_value_refused", [0, 0, 1, 1, 0, 0, 1, 1], value=1.5,
             refusal=["/Pad_0", "Pad", "Pad with a constant value other than 0 is not supported"]),
        case("pad_reflect_refused", [0, 0, 1, 1, 0, 0, 1, 1], mode="reflect",
             refusal=["/Pad_0", "Pad", "Pad mode 'reflect' is not supported (constant only)"]),
    ]


def untracked_batch_norm_cases(rng):
    """A training-mode BatchNormalization whose "running statistics" are computed values (timm's
    weight-standardised convolutions: F.batch_norm over the filter with running statistics None):
    it normalises with the batch statistics and tracks nothing; onnxruntime computes the same."""
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
             helper.make_node("Mul", ["m", "zero"], ["mean"]),
             helper.make_node("Add", ["mean", "one"], ["var"]),
             helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y", "rm", "rv"], name="/bn/BatchNorm",
                              training_mode=1, momentum=1.0, epsilon=1e-5)]
    inits = {"axes": np.array([0, 2, 3], np.int64), "zero": np.zeros(3, np.float32), "one": np.ones(3, np.float32),
             "scale": rng.uniform(0.5, 1.5, 3).astype(np.float32), "bias": rng.uniform(-0.5, 0.5, 3).astype(np.float32)}
    return [Case("batch_norm_untracked_statistics",
                 lambda: graph_model(nodes, {"x": list(x.shape)}, {"y": list(x.shape)}, inits, 18), {"x": x})]


def instance_norm_cases(rng):
    """InstanceNormalization with a trained scale and bias [C] on inputs of rank 3 to 5, and as
    PyTorch exports GroupNorm with one group (timm's poolformer): x viewed as [N, 1, C * H * W],
    normalised with Constant ones and zeros, reshaped back, then the trained affine; and the
    forms refused."""
    def case(name, shape, eps=None, refusal=None, scale_shape=None, reference=False):
        x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
        c = shape[1]
        inits = {"scale": rng.uniform(0.5, 1.5, scale_shape or [c]).astype(np.float32),
                 "bias": rng.uniform(-0.5, 0.5, scale_shape or [c]).astype(np.float32)}
        attrs = {} if eps is None else {"epsilon": eps}
        node = helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y"], name="/InstanceNormalization_0",
                                **attrs)

        def numpy_reference(feeds):
            v = feeds["x"].astype(np.float64)
            axes = tuple(range(2, v.ndim))
            mean, var = v.mean(axis=axes, keepdims=True), v.var(axis=axes, keepdims=True)
            affine = (c,) + (1,) * (v.ndim - 2)
            y = (v - mean) / np.sqrt(var + (1e-5 if eps is None else eps))
            return [(y * inits["scale"].reshape(affine) + inits["bias"].reshape(affine)).astype(np.float32)]
        return Case(name, lambda: graph_model([node], {"x": list(shape)}, {"y": list(shape)}, inits), {"x": x},
                    refusal=refusal, expected=numpy_reference if reference else None)

    def group_norm_one_group():
        shape = (2, 6, 5, 4)
        x = (rng.standard_normal(shape) * 2 - 1).astype(np.float32)
        nodes = [helper.make_node("Constant", [], ["flat"], value=numpy_helper.from_array(np.array([2, 1, -1], np.int64))),
                 helper.make_node("Reshape", ["x", "flat"], ["r"]),
                 helper.make_node("Constant", [], ["ones"], value=numpy_helper.from_array(np.ones(1, np.float32))),
                 helper.make_node("Constant", [], ["zeros"], value=numpy_helper.from_array(np.zeros(1, np.float32))),
                 helper.make_node("InstanceNormalization", ["r", "ones", "zeros"], ["n"], name="/InstanceNormalization_0",
                                  epsilon=1e-5),
                 helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Reshape", ["n", "s"], ["b"]),
                 helper.make_node("Unsqueeze", ["weight", "axes"], ["w3"]),
                 helper.make_node("Unsqueeze", ["bias", "axes"], ["b3"]),
                 helper.make_node("Mul", ["b", "w3"], ["m"]),
                 helper.make_node("Add", ["m", "b3"], ["y"])]
        inits = {"weight": rng.uniform(0.5, 1.5, 6).astype(np.float32), "bias": rng.uniform(-1, 1, 6).astype(np.float32),
                 "axes": np.array([1, 2], np.int64)}
        return Case("instance_norm_poolformer_group_norm_1", lambda: graph_model(nodes, {"x": list(shape)},
                                                                                   {"y": list(shape)}, inits), {"x": x})

    return [
        case("instance_norm_4d", (2, 3, 4, 5)),
        case("instance_norm_3d_epsilon", (3, 4, 7), eps=1e-2),
        case("instance_norm_5d", (1, 2, 3, 4, 5), eps=1e-6),
        # One position per channel: x - mean is 0, so y is the bias (onnxruntime's E[x²] - E[x]²
        # variance leaves a residue of about 1e-7 x², so the expected values are NumPy's, in f64).
        case("instance_norm_one_position", (2, 3, 1, 1), reference=True),
        group_norm_one_group(),
        case("instance_norm_rank2_refused", (2, 3),
             refusal=["/InstanceNormalization_0", "InstanceNormalization",
                      "an input [N, C, D1, ...] is needed, not one of rank 2"]),
        case("instance_norm_scale_shape_refused", (2, 3, 4), scale_shape=[3, 1],
             refusal=["/InstanceNormalization_0", "InstanceNormalization",
                      "the scale's shape [3, 1] is not [3] (one value per group)"]),
    ]


def group_norm_cases(rng):
    """GroupNormalization: opset 18's scale and bias per group (onnxruntime runs its function body,
    which applies them to x viewed as [N, G, K]), opset 21's per channel, on inputs of rank 2 to 5
    with one group, some, and one per channel; and the forms refused."""
    def case(name, shape, groups, opset=OPSET, eps=None, affine=None, refusal=None, stash=None):
        x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
        size = affine if affine is not None else (groups if opset < 21 else shape[1])
        inits = {"scale": rng.uniform(0.5, 1.5, size).astype(np.float32),
                 "bias": rng.uniform(-0.5, 0.5, size).astype(np.float32)}
        attrs = {} if groups is None else {"num_groups": groups}
        if eps is not None:
            attrs["epsilon"] = eps
        if stash is not None:
            attrs["stash_type"] = stash
        node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], name="/GroupNormalization_0",
                                **attrs)

        return Case(name, lambda: graph_model([node], {"x": list(shape)}, {"y": list(shape)}, inits, opset), {"x": x},
                    refusal=refusal)

    cases = []
    for opset in (18, OPSET):
        cases += [case(f"group_norm_g3_opset{opset}", (2, 6, 4, 5), 3, opset),
                  case(f"group_norm_g1_opset{opset}", (2, 4, 3, 3), 1, opset, eps=1e-3),
                  case(f"group_norm_per_channel_opset{opset}", (2, 4, 5), 4, opset),
                  case(f"group_norm_rank5_opset{opset}", (1, 6, 2, 3, 4), 2, opset, eps=1e-6)]
    cases += [
        case("group_norm_rank2", (3, 8), 4),
        case("group_norm_groups_not_dividing_refused", (2, 6, 4), 4, affine=6,
             refusal=["/GroupNormalization_0", "GroupNormalization", "num_groups 4 does not divide the 6 channels"]),
        case("group_norm_no_groups_refused", (2, 6, 4), None, affine=6,
             refusal=["/GroupNormalization_0", "GroupNormalization", "the attribute num_groups is required"]),
        case("group_norm_opset21_per_group_affine_refused", (2, 6, 4), 3, affine=3,
             refusal=["/GroupNormalization_0", "GroupNormalization",
                      "the scale's shape [3] is not [6] (one value per channel)"]),
        case("group_norm_opset18_per_channel_affine_refused", (2, 6, 4), 3, opset=18, affine=6,
             refusal=["/GroupNormalization_0", "GroupNormalization",
                      "the scale's shape [6] is not [3] (one value per group)"]),
        case("group_norm_stash_type_refused", (2, 6, 4), 3, stash=0,
             refusal=["/GroupNormalization_0", "GroupNormalization", "stash_type 0 is not supported"]),
        case("group_norm_opset17_refused", (2, 6, 4), 3, opset=17,
             refusal=["/GroupNormalization_0", "GroupNormalization",
                      "GroupNormalization is an op of opset 18 and later, the model declares opset 17"]),
    ]
    return cases


def resize_cases(rng):
    """Resize in nearest mode by integer factors, as timm's HRNet upsamples (asymmetric, floor, sizes
    computed from shapes). Each coordinate transformation and rounding, at factors 2 and 3 x 4: where
    onnxruntime's output is each element repeated (np.repeat), Castor must match it, elsewhere refuse
    naming the combination. Then scales on some axes (opset 18's axes), and the forms refused."""
    import onnxruntime
    x = rng.standard_normal((2, 3, 3, 5)).astype(np.float32)

    def model_of(inputs, inits, attrs, out_shape, opset=OPSET, extra_nodes=()):
        node = helper.make_node("Resize", inputs, ["y"], name="/Resize_0", **attrs)
        return graph_model(list(extra_nodes) + [node], {"x": list(x.shape)}, {"y": out_shape}, inits, opset)

    def scales_case(name, scales, refusal=None, opset=OPSET, expected=None, **attrs):
        inits = {"scales": np.array(scales, np.float32)}
        out = list(x.shape)
        for a, f in zip(attrs.get("axes", range(4)), scales):
            out[a] = int(out[a] * f)
        out = out if refusal is None else ["a", "b", "c", "d"]
        return Case(name, lambda: model_of(["x", "", "scales"], inits, attrs, out, opset), {"x": x}, refusal=refusal,
                    expected=expected)

    cases = []
    for transform, opset in (("half_pixel", OPSET), ("pytorch_half_pixel", OPSET), ("asymmetric", OPSET),
                             ("align_corners", OPSET), ("half_pixel_symmetric", OPSET)):
        for rounding in ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil"):
            for fh, fw in ((2, 2), (3, 4)):
                attrs = {"mode": "nearest", "coordinate_transformation_mode": transform, "nearest_mode": rounding}
                probe = model_of(["x", "", "scales"], {"scales": np.array([1, 1, fh, fw], np.float32)}, attrs,
                                 [2, 3, 3 * fh, 5 * fw], opset)
                got = onnxruntime.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"]).run(
                    None, {"x": x})[0]
                repeats = np.array_equal(got, np.repeat(np.repeat(x, fh, axis=2), fw, axis=3))
                refusal = None if repeats else [
                    "/Resize_0", "Resize", f"coordinate_transformation_mode '{transform}' with nearest_mode '{rounding}'"]
                cases.append(scales_case(f"resize_nearest_{transform}_{rounding}_x{fh}x{fw}", [1, 1, fh, fw],
                                         refusal=refusal, opset=opset, **attrs))

    def hrnet_sizes():
        """HRNet's upsampling: sizes from the input's shape (N, C) and a target's H and W, folded at
        import; asymmetric, floor."""
        nodes = [helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Slice", ["s", "zero", "two"], ["nc"]),
                 helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0)]
        inits = {"zero": np.array([0], np.int64), "two": np.array([2], np.int64), "hw": np.array([6, 20], np.int64)}
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor",
                 "cubic_coeff_a": -0.75}
        return model_of(["x", "", "", "sizes"], inits, attrs, [2, 3, 6, 20], extra_nodes=nodes)

    def sizes_case(name, sizes, refusal=None, **attrs):
        out = list(sizes) if refusal is None and len(sizes) == 4 else None
        if "axes" in attrs and refusal is None:
            out = list(x.shape)
            for a, s in zip(attrs["axes"], sizes):
                out[a] = s
        return Case(name, lambda: model_of(["x", "", "", "sizes"], {"sizes": np.array(sizes, np.int64)}, attrs,
                                           out if refusal is None else ["a", "b", "c", "d"]), {"x": x}, refusal=refusal)

    cases += [
        Case("resize_hrnet_sizes_from_shape", hrnet_sizes, {"x": x}),
        sizes_case("resize_sizes_default_modes", [2, 3, 9, 10]),
        sizes_case("resize_sizes_axes", [10, 6], axes=[3, 2]),
        # onnxruntime 1.20 refuses scales given for some axes ("Scale value should be greater than 0"):
        # the expected output is each element repeated, by NumPy.
        scales_case("resize_scales_axes_opset18", [2, 4], opset=18, axes=[-2, -1],
                    expected=lambda feeds: [np.repeat(np.repeat(feeds["x"], 2, axis=2), 4, axis=3)]),
        scales_case("resize_scales_channels_and_width", [1, 2, 1, 3]),
        scales_case("resize_scales_identity", [1, 1, 1, 1]),
        scales_case("resize_fractional_scale_refused", [1, 1, 1.5, 2],
                    refusal=["/Resize_0", "Resize", "scale 1.500000 on axis 2 is not supported (integer upsampling "
                                                    "factors only)"]),
        scales_case("resize_downsampling_refused", [1, 1, 0.5, 1],
                    refusal=["/Resize_0", "Resize", "scale 0.500000 on axis 2 is not supported"]),
        sizes_case("resize_sizes_not_multiple_refused", [2, 3, 7, 10],
                   refusal=["/Resize_0", "Resize", "size 7 on axis 2 is not a multiple of 3"]),
        sizes_case("resize_keep_aspect_ratio_refused", [6, 10], axes=[2, 3], keep_aspect_ratio_policy="not_larger",
                   refusal=["/Resize_0", "Resize", "keep_aspect_ratio_policy 'not_larger' is not supported"]),
        Case("resize_sizes_from_data_refused",
             lambda: graph_model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="/Resize_0")],
                                 {"x": list(x.shape), "sizes": [4]}, {"y": ["a", "b", "c", "d"]}), {},
             refusal=["/Resize_0", "Resize", "input 3 ('sizes') must be a constant"]),
    ]
    return cases


def tile_cases(rng):
    """Tile with known repeats on inputs of rank 1 to 4 (some axes repeated, all, none), and the
    forms refused."""
    def case(name, shape, repeats, refusal=None, from_data=False):
        x = rng.standard_normal(shape).astype(np.float32)
        inits = {} if from_data else {"repeats": np.array(repeats, np.int64)}
        inputs = {"x": list(shape)}
        if from_data:
            inputs["repeats"] = [len(repeats)]
        out = [d * r for d, r in zip(shape, repeats)] if refusal is None else ["a"] * len(shape)
        node = helper.make_node("Tile", ["x", "repeats"], ["y"], name="/Tile_0")
        return Case(name, lambda: graph_model([node], inputs, {"y": out}, inits), {"x": x}, refusal=refusal)

    return [
        case("tile_rank1", (5,), [3]),
        case("tile_rank2_both", (2, 3), [2, 4]),
        case("tile_rank3_middle", (2, 3, 4), [1, 3, 1]),
        case("tile_rank4_batch_and_width", (1, 2, 3, 4), [2, 1, 1, 3]),
        case("tile_identity", (2, 3), [1, 1]),
        case("tile_rank_mismatch_refused", (2, 3), [2],
             refusal=["/Tile_0", "Tile", "it has 1 repeats for an input of rank 2"]),
        case("tile_zero_repeat_refused", (2, 3), [0, 2],
             refusal=["/Tile_0", "Tile", "repeat 0 along axis 0 is not supported (1 or more)"]),
        Case("tile_repeats_from_data_refused",
             lambda: graph_model([helper.make_node("Tile", ["x", "repeats"], ["y"], name="/Tile_0")],
                                 {"x": [2, 3], "repeats": [2]}, {"y": ["a", "b"]}), {},
             refusal=["/Tile_0", "Tile", "input 1 ('repeats') must be a constant"]),
    ]


def constant_fold_cases(rng):
    """Sin, Cos and CumSum computed at import on constants (Castor has no kernel for them), their
    result added to the data; EdgeNeXt's Fourier positional encoding as exported, which folds
    whole to a constant that a trained 1x1 convolution reads; and the same ops on the data,
    refused."""
    shape = (2, 3, 4)
    x = rng.standard_normal(shape).astype(np.float32)

    def const_node(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))

    def on_constant(name, op_nodes, value, dtype=np.float32):
        """op_nodes read the Constant 'c' (of `value`) and write 'r', a float tensor of x's shape."""
        nodes = [const_node("c", np.asarray(value, dtype))] + op_nodes + [helper.make_node("Add", ["x", "r"], ["y"])]
        return Case(name, lambda: graph_model(nodes, {"x": list(shape)}, {"y": list(shape)}), {"x": x})

    values = rng.uniform(-4, 4, shape).astype(np.float32)
    counts = rng.integers(-3, 5, shape)

    def cumsum(name, axis, axis_type=np.int64, data=values, dtype=np.float32, **attrs):
        nodes = [const_node("axis", np.array(axis, axis_type)),
                 helper.make_node("CumSum", ["c", "axis"], ["s" if dtype != np.float32 else "r"], name="/CumSum_0",
                                  **attrs)]
        if dtype != np.float32:
            nodes.append(helper.make_node("Cast", ["s"], ["r"], to=TensorProto.FLOAT))
        return on_constant(name, nodes, data, dtype)

    def positional_encoding():
        """timm's PositionalEncodingFourier (EdgeNeXt) at hidden_dim 4, as torch.onnx writes it: a
        mask of the input's [N, H, W] from ConstantOfShape, Not, CumSum along H and W normalised by
        the last count, times 2 pi, over the temperature powers, Sin of the even and Cos of the odd
        features interleaved, both axes' concatenated, moved to channels and projected by a trained
        1x1 convolution, added to x [N, 4, H, W]."""
        nodes, inits = [], {}

        def c(name, value):
            nodes.append(const_node(name, value))
            return name

        def op(op_type, inputs, out, **attrs):
            nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
            return out

        big = 9223372036854775807
        s = op("Shape", ["x"], "shape")
        nhw = op("Gather", [s, c("nhw_idx", np.array([0, 2, 3], np.int64))], "nhw", axis=0)
        mask = op("Cast", [op("ConstantOfShape", [nhw], "zeros", value=numpy_helper.from_array(np.zeros(1, np.float32)))],
                  "mask", to=TensorProto.BOOL)
        keep = op("Not", [mask], "keep")
        dim_t = c("dim_t", (10000.0 ** (2 * (np.arange(4) // 2) / 4)).astype(np.float32))
        embeds = []
        for axis in (1, 2):
            cs = op("CumSum", [op("Cast", [keep], f"keepf{axis}", to=TensorProto.FLOAT), c(f"ax{axis}", np.array(axis, np.int64))],
                    f"cum{axis}", name=f"/pos_embd/CumSum_{axis}")
            last = op("Slice", [cs, c(f"m1_{axis}", np.array([-1], np.int64)), c(f"big{axis}", np.array([big], np.int64)),
                                c(f"a{axis}", np.array([axis], np.int64))], f"last{axis}")
            norm = op("Div", [cs, op("Add", [last, c(f"eps{axis}", np.array(1e-6, np.float32))], f"den{axis}")], f"norm{axis}")
            norm = op("Mul", [norm, c(f"tau{axis}", np.array(2 * np.pi, np.float32))], f"scaled{axis}")
            pos = op("Div", [op("Unsqueeze", [norm, c(f"u3_{axis}", np.array([3], np.int64))], f"un{axis}"), dim_t],
                     f"pos{axis}")
            parts = []
            for start, fn in ((0, "Sin"), (1, "Cos")):
                sl = op("Slice", [pos, c(f"st{axis}{start}", np.array([start], np.int64)),
                                  c(f"en{axis}{start}", np.array([big], np.int64)), c(f"a3{axis}{start}", np.array([3], np.int64)),
                                  c(f"two{axis}{start}", np.array([2], np.int64))], f"sl{axis}{start}")
                parts.append(op("Unsqueeze", [op(fn, [sl], f"{fn}{axis}", name=f"/pos_embd/{fn}_{axis}"),
                                              c(f"u4{axis}{start}", np.array([4], np.int64))], f"u{fn}{axis}"))
            both = op("Concat", parts, f"sc{axis}", axis=4)
            embeds.append(op("Reshape", [both, c(f"shape{axis}", np.array([2, 3, 5, -1], np.int64))], f"emb{axis}"))
        pos = op("Transpose", [op("Concat", embeds[::-1], "pos", axis=3)], "posT", perm=[0, 3, 1, 2])
        proj = op("Conv", [pos, "proj.weight", "proj.bias"], "proj", kernel_shape=[1, 1])
        op("Add", ["x", proj], "y")
        inits["proj.weight"] = (rng.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32)
        inits["proj.bias"] = rng.uniform(-0.1, 0.1, 4).astype(np.float32)
        return graph_model(nodes, {"x": [2, 4, 3, 5]}, {"y": [2, 4, 3, 5]}, inits)

    def refused(op, inputs, const_inputs, reason):
        nodes = [const_node(n, v) for n, v in const_inputs.items()] + [
            helper.make_node(op, inputs, ["y"], name=f"/{op}_0")]
        return Case(f"{op.lower()}_of_data_refused", lambda: graph_model(nodes, {"x": list(shape)}, {"y": list(shape)}),
                    {}, refusal=[f"/{op}_0", op, reason])

    return [
        on_constant("sin_folded", [helper.make_node("Sin", ["c"], ["r"])], values),
        on_constant("cos_folded", [helper.make_node("Cos", ["c"], ["r"])], values),
        cumsum("cumsum_folded_axis0", 0),
        cumsum("cumsum_folded_axis1_int32", 1, np.int32),
        cumsum("cumsum_folded_negative_axis", -1),
        cumsum("cumsum_folded_exclusive", 1, exclusive=1),
        cumsum("cumsum_folded_reverse", 2, reverse=1),
        cumsum("cumsum_folded_reverse_exclusive", 0, exclusive=1, reverse=1),
        cumsum("cumsum_folded_int64", 2, data=counts, dtype=np.int64, exclusive=1),
        Case("positional_encoding_fourier_folded", positional_encoding, {"x": rng.standard_normal((2, 4, 3, 5)).astype(np.float32)}),
        refused("Sin", ["x"], {}, "its input 'x' depends on the data"),
        refused("CumSum", ["x", "axis"], {"axis": np.array(1, np.int64)}, "its input 'x' depends on the data"),
    ]


def cases():
    import einsum_cases  # they build on this module's helpers
    import resize_linear_cases
    rng = np.random.default_rng(41)
    return (einsum_cases.cases(np.random.default_rng(43)) + resize_linear_cases.cases(np.random.default_rng(44)) +
            activation_cases(rng) + prelu_cases(rng) + reduce_cases(rng) + conv1d_cases(rng) + split_cases(rng) + pad_cases(rng) +
            instance_norm_cases(rng) + group_norm_cases(rng) + resize_cases(rng) + tile_cases(rng) +
            constant_fold_cases(rng) + untracked_batch_norm_cases(rng) +
            [node_test_with_constant_axes(name) for name in NODE_TESTS_WITH_AXES_INPUT])
