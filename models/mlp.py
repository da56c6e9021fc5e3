#!/usr/bin/env python3
"""Generate a small MLP ONNX model shaped like torch's training export.

    Flatten(axis=1) -> Gemm(transB=1) -> Relu [-> Dropout] -> Gemm(transB=1) [-> Sigmoid]

as `torch.onnx.export(..., dynamo=False, opset_version=17, training=TRAINING)`
writes it for a module whose forward is

    x = self.fc2(self.dropout(self.relu(self.fc1(self.flatten(x)))))

Node names follow the exporter's scopes (`/fc1/Gemm`), initializer names the
state_dict (`fc1.weight`, `fc1.bias`, ...).  Dropout, when asked for, is in
training form: ratio and training_mode come from Constant nodes and the mask
output is left unused, as torch writes it.

Usage:
    python3 mlp.py -o mlp.onnx                          # 1x28x28 -> 128 -> 10
    python3 mlp.py --hidden 256 --dropout 0.2 --sigmoid -o mlp_drop.onnx

Same weight options as resnet.py (--weights random|none, --external-data, --seed).
"""

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resnet  # noqa: E402  (shared helpers: weights, saving, checking)

DEFAULTS = {"num_classes": 10, "image_size": 28, "in_channels": 1}


def linear(b, x, module, fan_in, fan_out):
    bound = 1.0 / np.sqrt(fan_in)  # nn.Linear's default init
    w = b.param(module + ".weight", b.rng.uniform(-bound, bound, (fan_out, fan_in)))
    bias = b.param(module + ".bias", b.rng.uniform(-bound, bound, (fan_out,)))
    return b.node("Gemm", b.scope(module), [x, w, bias],
                  alpha=1.0, beta=1.0, transB=1)


def constant(b, scope, value):
    return b.node("Constant", scope, [], value=value)


def build_mlp(args):
    b = resnet.GraphBuilder(np.random.default_rng(args.seed))
    fan_in = args.in_channels * args.image_size * args.image_size
    x = b.node("Flatten", b.scope("flatten"), ["input"], axis=1)
    x = linear(b, x, "fc1", fan_in, args.hidden)
    x = b.node("Relu", b.scope("relu"), [x])
    if args.dropout is not None:
        # torch writes the two Constants inside the dropout module's scope
        # (/dropout/Constant, /dropout/Constant_1) and sets no seed.
        scope = b.scope("dropout")
        ratio = constant(b, scope, helper.make_tensor("value", TensorProto.FLOAT, [],
                                                      [args.dropout]))
        training = constant(b, scope, helper.make_tensor("value", TensorProto.BOOL, [],
                                                         [True]))
        x, _mask = b.node("Dropout", scope, [x, ratio, training], n_outputs=2)
    x = linear(b, x, "fc2", args.hidden, args.num_classes)
    if args.sigmoid:
        x = b.node("Sigmoid", b.scope("sigmoid"), [x])
    # the last node writes the graph output directly
    b.nodes[-1].output[0] = "output"
    inputs = [helper.make_tensor_value_info(
        "input", TensorProto.FLOAT,
        ["batch", args.in_channels, args.image_size, args.image_size])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                             ["batch", args.num_classes])]
    return b, inputs, outputs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dropout", type=float, default=None, metavar="RATIO",
                   help="add a training-mode Dropout after the Relu")
    p.add_argument("--sigmoid", action="store_true", help="end with a Sigmoid")
    resnet.add_common_args(p)
    args = p.parse_args(argv)
    resnet.resolve_defaults(args, DEFAULTS)
    if args.external_data and args.weights != "random":
        p.error("--external-data needs --weights random")
    b, inputs, outputs = build_mlp(args)
    model = resnet.make_model(
        "main_graph", b, inputs, outputs, args.weights, args.output,
        doc="mlp %d -> %d -> %d, dropout=%s, sigmoid=%s, weights=%s" % (
            args.in_channels * args.image_size ** 2, args.hidden, args.num_classes,
            args.dropout, args.sigmoid, args.weights))
    resnet.finish(model, args, "mlp")


if __name__ == "__main__":
    sys.exit(main())
