"""Whole-step gradient check: Castor's reverse-mode gradients against central finite
differences, in f64 on the CPU reference backend.

Each model is a small f64 ONNX graph built here; `castor compile --train --optimizer none
--emit-gradients` gives a plan whose outputs are the loss and every parameter's gradient.
For a sample of coordinates of every parameter the loss is evaluated at w +- h by running the
same plan with perturbed weights, and (L(w+h) - L(w-h)) / 2h must match the gradient.

Usage: gradcheck.py --bin BUILD/bin --work DIR [--models NAME ...]
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D = TensorProto.DOUBLE


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float64).tobytes()
        header[name] = {"dtype": "F64", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class Builder:
    """Collects nodes and f64 initializers of a test model."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def param(self, name, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        value = self.rng.normal(0, scale if scale is not None else 1 / np.sqrt(fan_in), shape)
        self.inits.append(numpy_helper.from_array(value.astype(np.float64), name))
        return name

    def const(self, value, dtype=np.int64):
        name = f"const{self.n}"
        self.n += 1
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def literal(self, value, dtype=np.float64):
        """A Constant node, as exporters write scalars (not a weight)."""
        self.n += 1
        name = f"literal{self.n}"
        self.nodes.append(helper.make_node("Constant", [], [name], name=f"/Constant_{self.n}",
                                           value=numpy_helper.from_array(np.asarray(value, dtype=dtype), name)))
        return name

    def op(self, op_type, inputs, outputs=1, **attrs):
        self.n += 1
        names = [f"t{self.n}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, name=f"/{op_type}_{self.n}", **attrs))
        return names[0] if outputs == 1 else names

    def bn(self, x, c, prefix):
        return self.op("BatchNormalization", [x, self.param(prefix + ".weight", [c], 0.5),
                                              self.param(prefix + ".bias", [c], 0.5),
                                              self.const(np.zeros(c), np.float64), self.const(np.ones(c), np.float64)],
                       outputs=3, epsilon=1e-5, momentum=0.9, training_mode=1)[0]

    def model(self, input_shape, output, classes, opset=17):
        graph = helper.make_graph(self.nodes, "gradcheck", [helper.make_tensor_value_info("input", D, input_shape)],
                                  [helper.make_tensor_value_info(output, D, [input_shape[0], classes])], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def cnn(rng):
    """conv-BN-ReLU blocks with a strided grouped conv, a projection shortcut, max pooling, gemm."""
    b = Builder(rng)
    x = b.op("Relu", [b.bn(b.op("Conv", ["input", b.param("conv1.weight", [4, 3, 3, 3]), b.param("conv1.bias", [4], 0.1)],
                                 pads=[1, 1, 1, 1]), 4, "bn1")])
    y = b.bn(b.op("Conv", [x, b.param("conv2.weight", [6, 2, 3, 3])], strides=[2, 2], pads=[1, 1, 1, 1], group=2), 6, "bn2")
    shortcut = b.bn(b.op("Conv", [x, b.param("down.weight", [6, 4, 1, 1])], strides=[2, 2]), 6, "bn3")
    y = b.op("Relu", [b.op("Add", [y, shortcut])])
    y = b.op("Flatten", [b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[1, 1])])
    b.op("Gemm", [y, b.param("fc.weight", [5, 24]), b.param("fc.bias", [5], 0.1)], transB=1)
    return b.model([2, 3, 6, 6], b.nodes[-1].output[0], 5)


def pools(rng):
    """dilated depthwise conv, sigmoid, average pooling (ceil mode), clip, broadcast mul, global
    average pooling, reshape, concat, matmul, broadcast add."""
    b = Builder(rng)
    x = b.op("Sigmoid", [b.op("Conv", ["input", b.param("dw.weight", [4, 1, 3, 3])], pads=[2, 2, 2, 2],
                               dilations=[2, 2], group=4)])
    x = b.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    x = b.op("Mul", [b.op("Clip", [x, b.const(0.2, np.float64), b.const(0.8, np.float64)]),
                     b.param("scale", [1, 4, 1, 1])])
    g = b.op("Reshape", [b.op("GlobalAveragePool", [x]), b.const([2, 4])])
    f = b.op("Flatten", [b.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])])
    y = b.op("Concat", [g, f], axis=1)
    b.op("Add", [b.op("MatMul", [y, b.param("proj.weight", [20, 3])]), b.param("proj.bias", [3], 0.1)])
    return b.model([2, 4, 7, 7], b.nodes[-1].output[0], 3)


def mlp(rng):
    """Flatten, gemm without transposition, ReLU, a difference of two computed tensors (Sub,
    broadcast over a trained offset), training-mode dropout, softmax feeding a gemm."""
    b = Builder(rng)
    h = b.op("Gemm", [b.op("Flatten", ["input"]), b.param("fc1.weight", [12, 8]), b.param("fc1.bias", [8], 0.1)])
    x = b.op("Relu", [b.op("Sub", [h, b.op("Mul", [h, b.param("shift", [8], 0.5)])])])
    x = b.op("Dropout", [x, b.const(0.25, np.float64), b.const(True, np.bool_)])
    x = b.op("Softmax", [x], axis=1)
    b.op("Gemm", [x, b.param("fc2.weight", [4, 8]), b.param("fc2.bias", [4], 0.1)], transB=1, alpha=2.0)
    return b.model([3, 3, 2, 2], b.nodes[-1].output[0], 4)


def mobile(rng):
    """MobileNetV3's blocks: hard-swish after a conv, a squeeze-excitation gate through
    hard-sigmoid (PyTorch's alpha 1/6) scaling the features, and ONNX's default hard-sigmoid."""
    b = Builder(rng)
    x = b.op("HardSwish", [b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3], 2.0)], pads=[1, 1, 1, 1])])
    s = b.op("Relu", [b.op("Conv", [b.op("GlobalAveragePool", [x]), b.param("se1.weight", [2, 4, 1, 1]),
                                    b.param("se1.bias", [2], 0.1)])])
    s = b.op("HardSigmoid", [b.op("Conv", [s, b.param("se2.weight", [4, 2, 1, 1], 3.0), b.param("se2.bias", [4], 0.5)])],
             alpha=1.0 / 6.0, beta=0.5)
    x = b.op("HardSigmoid", [b.op("Mul", [x, s])])
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    b.op("Gemm", [x, b.param("fc.weight", [3, 4]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 5, 5], b.nodes[-1].output[0], 3)


def frozen(rng):
    """Inference-form BatchNorm (an eval-mode export) trained with its statistics frozen, on a
    4-D activation and on a 2-D one (BatchNorm1d)."""
    b = Builder(rng)

    def frozen_bn(x, c, prefix):
        # Statistics unlike the weights (constants: they are not differentiated).
        mean = b.const(rng.normal(0, 0.5, c), np.float64)
        var = b.const(rng.uniform(0.5, 2.0, c), np.float64)
        return b.op("BatchNormalization", [x, b.param(prefix + ".weight", [c], 0.5), b.param(prefix + ".bias", [c], 0.5),
                                           mean, var], epsilon=1e-3)

    x = b.op("Relu", [frozen_bn(b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1]),
                                4, "bn1")])
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    x = frozen_bn(x, 4, "bn2")
    b.op("Gemm", [x, b.param("fc.weight", [3, 4]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 5, 5], b.nodes[-1].output[0], 3)


def shuffle(rng):
    """ShuffleNet's channel split and shuffle and a class-token pick: slices (one strided backwards
    from the end), reshape-transpose-reshape, a rank-3 transpose, Gather at scalar indices of the
    data, Unsqueeze and Squeeze of the data."""
    b = Builder(rng)
    x = b.op("Conv", ["input", b.param("conv.weight", [6, 3, 3, 3])], pads=[1, 1, 1, 1])
    left = b.op("Slice", [x, b.const([0]), b.const([3]), b.const([1])])
    right = b.op("Sigmoid", [b.op("Slice", [x, b.const([-1]), b.const([-7]), b.const([1]), b.const([-2])])])
    y = b.op("Reshape", [b.op("Concat", [left, right], axis=1), b.const([2, 2, 3, 4, 4])])
    y = b.op("Reshape", [b.op("Transpose", [y], perm=[0, 2, 1, 3, 4]), b.const([2, 6, 16])])
    y = b.op("Transpose", [y], perm=[0, 2, 1])
    t = b.op("Add", [b.op("Gather", [y, b.const(0)], axis=1), b.op("Gather", [y, b.const(-3)], axis=1)])
    t = b.op("Squeeze", [b.op("Unsqueeze", [t, b.const([1])]), b.const([1])])
    b.op("Gemm", [t, b.param("fc.weight", [3, 6]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 4, 4], b.nodes[-1].output[0], 3)


def transformer(rng, dim=4, heads=2):
    """A ViT block in miniature: patch-embedding conv, tokens by reshape and transpose, a class
    token expanded over the batch, layer norm, attention with `heads` heads over `dim` features
    (a linear layer as exported: MatMul by a transposed weight and Add of its bias; batched
    matmuls, a scale divided out, softmax), GELU in the exporter's erf form, the class token's
    head; and stochastic depth as exported, with survival probability 1 so the step stays
    deterministic. With a head size of 8 or more (dim 32, 2 heads, say) a mixed-precision step
    fuses the attention (castor-fuse-attention)."""
    b = Builder(rng)
    x = b.op("Conv", ["input", b.param("patch.weight", [dim, 3, 2, 2])], strides=[2, 2])
    x = b.op("Transpose", [b.op("Reshape", [x, b.const([2, dim, 4])])], perm=[0, 2, 1])
    cls = b.op("Expand", [b.param("cls", [1, 1, dim], 0.5), b.const([2, 1, dim])])
    x = b.op("Concat", [cls, x], axis=1)
    h = b.op("LayerNormalization", [x, b.param("ln.weight", [dim], 0.5), b.param("ln.bias", [dim], 0.5)],
             axis=-1, epsilon=1e-5)

    def split(t):
        return b.op("Transpose", [b.op("Reshape", [t, b.const([2, 5, heads, dim // heads])])], perm=[0, 2, 1, 3])

    q, k = (b.op("MatMul", [h, b.param(f"{n}.weight", [dim, dim])]) for n in "qk")
    # v as torch.onnx writes nn.Linear on tokens: MatMul by the transposed weight, Add of the bias.
    v = b.op("Add", [b.param("v.bias", [dim], 0.5),
                     b.op("MatMul", [h, b.op("Transpose", [b.param("v.weight", [dim, dim])], perm=[1, 0])])])
    s = b.op("MatMul", [split(q), b.op("Transpose", [split(k)], perm=[0, 1, 3, 2])])
    s = b.op("Softmax", [b.op("Div", [s, b.literal(1.5)])], axis=-1)
    o = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [s, split(v)])], perm=[0, 2, 1, 3]),
                         b.const([2, 5, dim])])
    keep = b.literal(1.0)
    mask = b.op("Div", [b.op("Cast", [b.op("Less", [b.op("RandomUniformLike", [b.literal(np.zeros((2, 1, 1)))],
                                                            dtype=TensorProto.DOUBLE), keep])],
                              to=TensorProto.DOUBLE), b.literal(1.0)])
    x = b.op("Add", [x, b.op("Mul", [o, mask])])
    g = b.op("Add", [b.op("Erf", [b.op("Div", [x, b.literal(np.sqrt(2.0))])]), b.literal(1.0)])
    g = b.op("Mul", [b.op("Mul", [x, g]), b.literal(0.5)])
    t = b.op("Gather", [g, b.const(0)], axis=1)
    b.op("Gemm", [t, b.param("fc.weight", [3, dim]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 4, 4], b.nodes[-1].output[0], 3)


def window(rng):
    """Swin's window-attention pieces: zero padding (the identity), a trained bias table read
    through an index table with repeats and no order (its gradient sums the repeated rows),
    added to the scores before softmax."""
    b = Builder(rng)
    x = b.op("Pad", ["input", b.const([0, 0, 0, 0, 0, 0, 0, 0])], mode="constant")
    index = b.const([3, 0, 0, 5, 2, 2, 1, 4, 3, 3, 0, 1, 5, 4, 2, 0])
    bias = b.op("Reshape", [b.op("Gather", [b.param("bias_table", [6, 1], 1.0), index], axis=0),
                            b.const([4, 4])])
    s = b.op("Softmax", [b.op("Add", [x, bias])], axis=-1)
    b.op("Gemm", [b.op("Flatten", [s]), b.param("fc.weight", [3, 32])], transB=1)
    return b.model([2, 2, 4, 4], b.nodes[-1].output[0], 3)


def activations(rng):
    """ELU (alpha 0.7), SELU, CELU (alpha 1.3), softplus, mish and softsign of one gemm's output
    (spread wide, so that both sides of each kink and softplus's tails are reached), concatenated
    into a gemm."""
    b = Builder(rng)
    h = b.op("Gemm", [b.op("Flatten", ["input"]), b.param("fc1.weight", [12, 8], 1.5)])
    branches = [b.op("Elu", [h], alpha=0.7), b.op("Selu", [h]), b.op("Celu", [h], alpha=1.3), b.op("Softplus", [h]),
                b.op("Mish", [h]), b.op("Softsign", [h])]
    x = b.op("Concat", branches, axis=1)
    b.op("Gemm", [x, b.param("fc2.weight", [4, 48]), b.param("fc2.bias", [4], 0.1)], transB=1)
    return b.model([3, 3, 2, 2], b.nodes[-1].output[0], 4, opset=18)


def prelu(rng):
    """PRelu after a conv, its slope per channel as nn.PReLU(channels) exports it ([C, 1, 1]),
    then a shared slope ([1]) after the gemm: both slopes are trained."""
    b = Builder(rng)
    x = b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    x = b.op("PRelu", [x, b.param("prelu1.weight", [4, 1, 1], 0.5)])
    x = b.op("Gemm", [b.op("Flatten", [x]), b.param("fc1.weight", [6, 36])], transB=1)
    x = b.op("PRelu", [x, b.param("prelu2.weight", [1], 0.5)])
    b.op("Gemm", [x, b.param("fc2.weight", [3, 6]), b.param("fc2.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3)


def reductions(rng):
    """ReduceMean over the channels, ReduceSum over the rows, ReduceMax over the columns (its
    gradient to each maximum) and ReduceL2 over channels and columns of one conv's output,
    flattened, concatenated into a gemm (opset 18: the axes are constant inputs)."""
    b = Builder(rng)
    h = b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    mean = b.op("ReduceMean", [h, b.const([1])], keepdims=1)
    total = b.op("ReduceSum", [h, b.const([2])], keepdims=1)
    peak = b.op("ReduceMax", [h, b.const([-1])], keepdims=0)
    norm = b.op("ReduceL2", [h, b.const([1, 3])], keepdims=0)
    x = b.op("Concat", [b.op("Flatten", [t]) for t in (mean, total, peak, norm)], axis=1)
    b.op("Gemm", [x, b.param("fc.weight", [3, 52]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 4, 4], b.nodes[-1].output[0], 3, opset=18)


def eca(rng):
    """ECA's channel attention (timm's EcaModule): the channels' means as a sequence [N, 1, C],
    a 1-D convolution over them (kernel 3, padding 1, no bias), sigmoid, scaling the features;
    then a grouped, strided, dilated 1-D convolution with a bias over the flattened rows."""
    b = Builder(rng)
    h = b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    s = b.op("Reshape", [b.op("GlobalAveragePool", [h]), b.const([2, 1, 4])])
    s = b.op("Sigmoid", [b.op("Conv", [s, b.param("eca.weight", [1, 1, 3], 1.0)], pads=[1, 1])])
    x = b.op("Mul", [h, b.op("Reshape", [s, b.const([2, 4, 1, 1])])])
    x = b.op("Conv", [b.op("Reshape", [x, b.const([2, 4, 9])]), b.param("conv1d.weight", [6, 2, 3]),
                      b.param("conv1d.bias", [6], 0.1)], group=2, strides=[2], dilations=[2], pads=[2, 1])
    b.op("Gemm", [b.op("Flatten", [x]), b.param("fc.weight", [3, 24]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3)


def split(rng):
    """Split as timm's exports write it: a conv's channels into unequal parts (CSPNet, Res2Net),
    one gating the other, and a linear layer's output into three equal parts (ViT's qkv.unbind),
    combined; every part's gradient reaches the input."""
    b = Builder(rng)
    h = b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    a, c = b.op("Split", [h, b.const([1, 3])], outputs=2, axis=1)
    a = b.op("Sigmoid", [a])
    x = b.op("Concat", [b.op("Mul", [c, a]), a], axis=1)
    f = b.op("Gemm", [b.op("Flatten", [x]), b.param("fc1.weight", [6, 36])], transB=1)
    q, k, v = b.op("Split", [b.op("Reshape", [f, b.const([2, 3, 2])])], outputs=3, axis=1)
    y = b.op("Add", [b.op("Mul", [q, k]), v])
    b.op("Gemm", [b.op("Flatten", [y]), b.param("fc2.weight", [3, 2]), b.param("fc2.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3)


def pad(rng):
    """timm's TF-style SAME padding: zeros after the bottom row and right column (Pad, constant
    mode), then a strided convolution without padding."""
    b = Builder(rng)
    x = b.op("Pad", ["input", b.const([0, 0, 0, 0, 0, 0, 1, 1])], mode="constant")
    h = b.op("Conv", [x, b.param("conv.weight", [4, 3, 3, 3])], strides=[2, 2])
    b.op("Gemm", [b.op("Flatten", [h]), b.param("fc.weight", [3, 4]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3)


def instance_norm(rng):
    """InstanceNormalization with a trained scale and bias after a conv, then timm's poolformer
    GroupNorm with one group as exported: the features viewed as [N, 1, C * H * W], normalised
    with Constant ones and zeros, reshaped back, times a trained weight plus a trained bias."""
    b = Builder(rng)
    h = b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    h = b.op("InstanceNormalization", [h, b.param("in.weight", [4], 0.5), b.param("in.bias", [4], 0.5)], epsilon=1e-5)
    g = b.op("InstanceNormalization", [b.op("Reshape", [h, b.const([2, 1, -1])]), b.literal(np.ones(1)),
                                       b.literal(np.zeros(1))], epsilon=1e-5)
    g = b.op("Reshape", [g, b.const([2, 4, 3, 3])])
    g = b.op("Add", [b.op("Mul", [g, b.param("gn.weight", [4, 1, 1], 0.5)]), b.param("gn.bias", [4, 1, 1], 0.5)])
    x = b.op("Mul", [b.op("Sigmoid", [g]), h])
    b.op("Gemm", [b.op("Flatten", [x]), b.param("fc.weight", [3, 36]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3)


def group_norm(rng, opset=21):
    """GroupNormalization in 2 groups of 2 channels after a conv: at opset 21 its trained scale and
    bias are per channel, at opset 18 per group; then a gate by its sigmoid."""
    b = Builder(rng)
    h = b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    affine = 4 if opset >= 21 else 2
    g = b.op("GroupNormalization", [h, b.param("gn.weight", [affine], 0.5), b.param("gn.bias", [affine], 0.5)],
             num_groups=2, epsilon=1e-5)
    x = b.op("Mul", [b.op("Sigmoid", [g]), h])
    b.op("Gemm", [b.op("Flatten", [x]), b.param("fc.weight", [3, 36]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3, opset=opset)


def resize(rng):
    """HRNet's fusion: a low-resolution branch upsampled by nearest Resize (sizes, asymmetric,
    floor: each element repeated twice along H and W) and added to the high-resolution one, and
    a default-mode Resize (half_pixel, round_prefer_floor) by 3 along W only; every copy's gradient
    reaches the element it repeats."""
    b = Builder(rng)
    hi = b.op("Conv", ["input", b.param("hi.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    lo = b.op("Conv", ["input", b.param("lo.weight", [4, 3, 3, 3])], strides=[2, 2], pads=[1, 1, 1, 1])
    up = b.op("Resize", [lo, "", "", b.const([2, 4, 4, 4])], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = b.op("Sigmoid", [b.op("Add", [hi, up])])
    wide = b.op("Resize", [lo, "", b.const([1, 1, 1, 3], np.float32)], mode="nearest")
    y = b.op("Concat", [b.op("Flatten", [x]), b.op("Flatten", [b.op("Mul", [wide, wide])])], axis=1)
    b.op("Gemm", [y, b.param("fc.weight", [3, 112]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 4, 4], b.nodes[-1].output[0], 3, opset=19)


def tile(rng):
    """Tile of a conv's output along the channels and the width, gated by the same features tiled
    along the channels and the height: each copy's gradient reaches the element it copies."""
    b = Builder(rng)
    h = b.op("Conv", ["input", b.param("conv.weight", [2, 3, 3, 3])], pads=[1, 1, 1, 1])
    a = b.op("Tile", [h, b.const([1, 2, 1, 2])])
    g = b.op("Sigmoid", [b.op("Reshape", [b.op("Tile", [h, b.const([1, 2, 2, 1])]), b.const([2, 4, 3, 6])])])
    x = b.op("Mul", [a, g])
    b.op("Gemm", [b.op("Flatten", [x]), b.param("fc.weight", [3, 72]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3)


def einsum(rng):
    """Attention and token mixing written as Einsum: NCHW to tokens by a one-operand permutation,
    q, k, v by a weight [out, in] and [in, out] ("bnc,dc->bnd", "bnc,cd->bnd"), heads split by
    a permutation, scores and the weighted sum per batch and head, a token-mixing weight on the
    left ("tn,bhnd->bhtd"), a contraction over heads and features of two values, and a sum over
    one operand's axes; every weight gets its gradient through the transposes and matmuls."""
    b = Builder(rng)
    x = b.op("Conv", ["input", b.param("patch.weight", [4, 3, 2, 2])], strides=[2, 2])
    t = b.op("Reshape", [b.op("Einsum", [x], equation="bchw->bhwc"), b.const([2, 4, 4])])
    q = b.op("Einsum", [t, b.param("q.weight", [4, 4])], equation="bnc,dc->bnd")
    k = b.op("Einsum", [t, b.param("k.weight", [4, 4])], equation="bnc,cd->bnd")
    v = b.op("Einsum", [t, b.param("v.weight", [4, 4])], equation="bnc,dc->bnd")

    def heads(u):
        return b.op("Einsum", [b.op("Reshape", [u, b.const([2, 4, 2, 2])])], equation="bnhd->bhnd")

    s = b.op("Softmax", [b.op("Einsum", [heads(q), heads(k)], equation="bhid,bhjd->bhij")], axis=-1)
    o = b.op("Einsum", [s, heads(v)], equation="bhij,bhjd->bhid")
    m = b.op("Einsum", [b.param("mix.weight", [4, 4]), o], equation="tn,bhnd->bhtd")
    energy = b.op("Einsum", [m, o], equation="bhtd,bhtd->bt")
    total = b.op("Einsum", [m], equation="bhtd->bt")
    y = b.op("Concat", [energy, total], axis=1)
    b.op("Gemm", [y, b.param("fc.weight", [3, 8]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 4, 4], b.nodes[-1].output[0], 3)


def resize_linear(rng):
    """An FPN-style top-down path: a low-resolution branch upsampled bilinearly (scales 2,
    half_pixel, as F.interpolate(align_corners=False)) and added to the high-resolution one, the
    sum resized to a fractional size with align_corners and downsampled by pytorch_half_pixel
    along W only; each output's gradient reaches the inputs it interpolates."""
    b = Builder(rng)
    hi = b.op("Conv", ["input", b.param("hi.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    lo = b.op("Conv", ["input", b.param("lo.weight", [4, 3, 3, 3])], strides=[2, 2], pads=[1, 1, 1, 1])
    up = b.op("Resize", [lo, "", b.const([1, 1, 2, 2], np.float32)], mode="linear",
              coordinate_transformation_mode="half_pixel")
    x = b.op("Sigmoid", [b.op("Add", [hi, up])])
    odd = b.op("Resize", [x, "", "", b.const([2, 4, 5, 3])], mode="linear",
               coordinate_transformation_mode="align_corners")
    narrow = b.op("Resize", [b.op("Mul", [x, x]), "", "", b.const([2, 4, 4, 3])], mode="linear",
                  coordinate_transformation_mode="pytorch_half_pixel")
    y = b.op("Concat", [b.op("Flatten", [odd]), b.op("Flatten", [narrow])], axis=1)
    b.op("Gemm", [y, b.param("fc.weight", [3, 108]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 4, 4], b.nodes[-1].output[0], 3, opset=19)


def normalize(rng):
    """F.normalize as exported (EdgeNeXt's cross-covariance attention): a conv's features divided
    by their L2 norm over the channels (Div by a computed tensor: a product with its reciprocal),
    and by a trained divisor; both divisors get their gradients."""
    b = Builder(rng)
    h = b.op("Conv", ["input", b.param("conv.weight", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    norm = b.op("Clip", [b.op("ReduceL2", [h, b.const([1])], keepdims=1), b.literal(1e-3)])
    x = b.op("Div", [h, norm])
    x = b.op("Div", [x, b.op("Add", [b.param("temperature", [4, 1, 1], 0.2), b.literal(1.5)])])
    b.op("Gemm", [b.op("Flatten", [x]), b.param("fc.weight", [3, 36]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 3, 3], b.nodes[-1].output[0], 3, opset=18)


def convnext(rng, dim=8):
    """ConvNeXt as exported: a stem conv and its LayerNorm2d (permute to NHWC, LayerNorm over the
    channels, permute back); a block of 7x7 depthwise conv, permute, LayerNorm, Linear (MatMul by
    the transposed weight, Add of the bias), GELU in the erf form, Linear, permute back, layer
    scale, residual add; global average pooling and the head. Every permute of the step is a
    transposed view (castor-plan-views), whose [N,C,H,W] side the CPU reference stores channels-last."""
    b = Builder(rng)

    def norm(t, prefix):
        return b.op("LayerNormalization", [t, b.param(prefix + ".weight", [dim], 0.5),
                                           b.param(prefix + ".bias", [dim], 0.5)], axis=-1, epsilon=1e-6)

    def linear(t, prefix, n_out, n_in):
        w = b.op("Transpose", [b.param(prefix + ".weight", [n_out, n_in])], perm=[1, 0])
        return b.op("Add", [b.op("MatMul", [t, w]), b.param(prefix + ".bias", [n_out], 0.1)])

    x = b.op("Conv", ["input", b.param("stem.weight", [dim, 3, 2, 2]), b.param("stem.bias", [dim], 0.1)],
             strides=[2, 2])
    x = b.op("Transpose", [norm(b.op("Transpose", [x], perm=[0, 2, 3, 1]), "stem.norm")], perm=[0, 3, 1, 2])
    y = b.op("Conv", [x, b.param("dw.weight", [dim, 1, 7, 7]), b.param("dw.bias", [dim], 0.1)], pads=[3, 3, 3, 3],
             group=dim)
    y = linear(norm(b.op("Transpose", [y], perm=[0, 2, 3, 1]), "norm"), "fc1", 4 * dim, dim)
    g = b.op("Add", [b.op("Erf", [b.op("Div", [y, b.literal(np.sqrt(2.0))])]), b.literal(1.0)])
    y = linear(b.op("Mul", [b.op("Mul", [y, g]), b.literal(0.5)]), "fc2", dim, 4 * dim)
    y = b.op("Mul", [b.op("Transpose", [y], perm=[0, 3, 1, 2]), b.param("gamma", [dim, 1, 1], 0.5)])
    x = b.op("Flatten", [b.op("GlobalAveragePool", [b.op("Add", [x, y])])])
    b.op("Gemm", [x, b.param("fc.weight", [3, dim]), b.param("fc.bias", [3], 0.1)], transB=1)
    return b.model([2, 3, 8, 8], b.nodes[-1].output[0], 3)


MODELS = {"cnn": cnn, "pools": pools, "mlp": mlp, "mobile": mobile, "frozen": frozen, "shuffle": shuffle, "transformer": transformer,
          "window": window, "activations": activations,
          "prelu": prelu, "reductions": reductions, "eca": eca, "split": split, "pad": pad, "normalize": normalize,
          "instance_norm": instance_norm, "group_norm": group_norm,
          "group_norm_opset18": lambda rng: group_norm(rng, opset=18), "resize": resize,
          "tile": tile, "convnext": convnext, "einsum": einsum, "resize_linear": resize_linear}


def check(name, args, rng):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    model = MODELS[name](rng)
    onnx_path, plan = os.path.join(work, "model.onnx"), os.path.join(work, "model.plan")
    onnx.save(model, onnx_path)
    subprocess.run([os.path.join(args.bin, "castor"), "compile", onnx_path, "-o", plan, "--train", "--optimizer",
                    "none", "--emit-gradients", "--label-smoothing", "0.1"], check=True, stderr=subprocess.DEVNULL)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    classes = model.graph.output[0].type.tensor_type.shape.dim[1].dim_value
    np.save(os.path.join(work, "images.npy"), rng.standard_normal(shape))
    np.save(os.path.join(work, "labels.npy"), rng.integers(0, classes, shape[0]).astype(np.int64))
    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer if i.data_type == D and
               not i.name.startswith("const")}

    def run(values):
        wpath = os.path.join(work, "w.safetensors")
        # Constants (BN running statistics, clip bounds) stay as the compiler wrote them.
        write_safetensors(wpath, values)
        base = os.path.join(work, "model.weights.safetensors")
        cmd = [os.path.join(args.bin, "castor-run"), "infer", plan, "--weights", wpath,
               "--input", "images=" + os.path.join(work, "images.npy"),
               "--input", "labels=" + os.path.join(work, "labels.npy"),
               "--output", "loss=" + os.path.join(work, "loss.npy"),
               "--output", "correct=" + os.path.join(work, "correct.npy")]
        for g in weights:  # castor-run writes every output of the plan
            cmd += ["--output", f"grad:{g}=" + os.path.join(work, f"grad_{g}.npy")]
        merged = dict(read_safetensors(base))
        merged.update(values)
        write_safetensors(wpath, merged)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return float(np.load(os.path.join(work, "loss.npy")))

    run(weights)
    grads = {p: np.load(os.path.join(work, f"grad_{p}.npy")) for p in weights}
    failures, worst = 0, 0.0
    h = 1e-5
    for pname, value in weights.items():
        grad = grads[pname]
        assert grad.shape == value.shape, (pname, grad.shape, value.shape)
        flat = value.reshape(-1)
        picks = rng.choice(flat.size, size=min(flat.size, args.samples), replace=False)
        for i in picks:
            plus, minus = flat.copy(), flat.copy()
            plus[i] += h
            minus[i] -= h
            lp = run({**weights, pname: plus.reshape(value.shape)})
            lm = run({**weights, pname: minus.reshape(value.shape)})
            fd, an = (lp - lm) / (2 * h), grad.reshape(-1)[i]
            err = abs(fd - an) / max(1e-3, abs(fd))
            worst = max(worst, err)
            if not abs(fd - an) <= 1e-6 + 1e-5 * abs(fd):
                failures += 1
                print(f"  {name}: d loss / d {pname}[{i}]: finite difference {fd:.10g}, castor {an:.10g}")
    print(f"{name}: {len(weights)} parameters, worst relative difference {worst:.2e}: "
          f"{'ok' if failures == 0 else f'{failures} FAILED'}")
    return failures


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    types = {"F64": np.float64, "F32": np.float32, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=types[info["dtype"]]).reshape(info["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(20261129)
    failures = sum(check(name, args, rng) for name in args.models)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
