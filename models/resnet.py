#!/usr/bin/env python3
"""Generate ResNet-family ONNX models shaped like torchvision's training export.

The graph matches what

    torch.onnx.export(model, x, f, dynamo=False, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})

writes for a torchvision ResNet: Conv (no bias), BatchNormalization in training
mode with its three outputs (the running mean/var outputs are left unused, as
torch leaves them), Relu, MaxPool, Add for the residuals, GlobalAveragePool,
Flatten and Gemm.  Node names follow the exporter's scope names
(`/layer1/layer1.0/conv1/Conv`), initializer names the torchvision state_dict
(`layer1.0.downsample.1.running_var`), so weights can be matched with PyTorch
checkpoints.  No torch is needed here: the model is built with onnx.helper.

Usage:
    python3 resnet.py --arch resnet50 --weights none -o resnet50.onnx
    python3 resnet.py --arch tiny --weights random -o tiny.onnx

The helpers at the bottom (weights, saving, checking) are shared with mlp.py.
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what torch's TorchScript exporter writes for opset 17
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9  # ONNX convention: 1 - torch's momentum (0.1)

# arch -> (block kind, blocks per stage)
ARCHS = {
    "resnet18": ("basic", [2, 2, 2, 2]),
    "resnet34": ("basic", [3, 4, 6, 3]),
    "resnet50": ("bottleneck", [3, 4, 6, 3]),
    "resnet101": ("bottleneck", [3, 4, 23, 3]),
    "tiny": ("basic", [1, 1]),
}

# Defaults that differ for the test-sized network (Fashion-MNIST shaped).
ARCH_DEFAULTS = {
    "tiny": {"num_classes": 10, "image_size": 28, "in_channels": 1},
}
DEFAULTS = {"num_classes": 1000, "image_size": 224, "in_channels": 3}


class GraphBuilder:
    """Collects nodes and initializers, naming them the way torch's exporter does."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []  # (name, numpy array)
        self.name_counts = {}
        self.module_calls = {}

    def _unique(self, name):
        # The exporter suffixes repeated node names with _1, _2, ...
        n = self.name_counts.get(name, 0)
        self.name_counts[name] = n + 1
        return name if n == 0 else "%s_%d" % (name, n)

    def node(self, op, scope, inputs, n_outputs=1, **attrs):
        name = self._unique("%s/%s" % (scope, op))
        outputs = ["%s_output_%d" % (name, i) for i in range(n_outputs)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0] if n_outputs == 1 else outputs

    def scope(self, module):
        """Scope of one call of `module`; a module called again (torchvision's
        blocks reuse their `relu`) gets `_1`, `_2`, ... on its own scope level:
        `/layer1/layer1.0/relu_1/Relu`."""
        n = self.module_calls.get(module, 0)
        self.module_calls[module] = n + 1
        return scope_of(module) + ("_%d" % n if n else "")

    def param(self, name, array):
        self.initializers.append((name, array.astype(np.float32)))
        return name


def scope_of(module_path):
    """Torch's scoped node-name prefix for a module path: one level per module,
    named by its attribute name, except that children of a Sequential (numeric
    names) are shown with their parent's name in front:
    `layer1.0.conv1` -> `/layer1/layer1.0/conv1`,
    `layer1.0.downsample.0` -> `/layer1/layer1.0/downsample/downsample.0`."""
    if not module_path:
        return ""
    parts = module_path.split(".")
    scope = ""
    for i, p in enumerate(parts):
        scope += "/" + ("%s.%s" % (parts[i - 1], p) if p.isdigit() and i else p)
    return scope


def conv(b, x, module, cin, cout, k, stride=1, pad=0):
    # torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu")
    std = np.sqrt(2.0 / (cout * k * k))
    w = b.param(module + ".weight", b.rng.normal(0.0, std, (cout, cin, k, k)))
    return b.node("Conv", b.scope(module), [x, w],
                  dilations=[1, 1], group=1, kernel_shape=[k, k],
                  pads=[pad, pad, pad, pad], strides=[stride, stride])


def batchnorm(b, x, module, c, zero_gamma=False):
    names = [b.param(module + ".weight", np.zeros(c) if zero_gamma else np.ones(c)),
             b.param(module + ".bias", np.zeros(c)),
             b.param(module + ".running_mean", np.zeros(c)),
             b.param(module + ".running_var", np.ones(c))]
    y, _running_mean, _running_var = b.node(
        "BatchNormalization", b.scope(module), [x] + names, n_outputs=3,
        epsilon=BN_EPSILON, momentum=BN_MOMENTUM, training_mode=1)
    return y


# "relu", "relu6": Clip(x, 0, 6) as torch exports nn.ReLU6, its bounds Constant nodes (so that
# they stay in the graph with --weights none), or "silu": x * Sigmoid(x) as torch exports nn.SiLU.
ACTIVATION = "relu"


def relu(b, x, module):
    if ACTIVATION == "relu6":
        scope = b.scope(module)
        lo = b.node("Constant", scope, [], value=helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]))
        hi = b.node("Constant", scope, [], value=helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0]))
        return b.node("Clip", scope, [x, lo, hi])
    if ACTIVATION == "silu":
        scope = b.scope(module)
        return b.node("Mul", scope, [x, b.node("Sigmoid", scope, [x])])
    return b.node("Relu", b.scope(module), [x])


def basic_block(b, x, prefix, cin, cout, stride):
    identity = x
    out = conv(b, x, prefix + ".conv1", cin, cout, 3, stride, 1)
    out = batchnorm(b, out, prefix + ".bn1", cout)
    out = relu(b, out, prefix + ".relu")
    out = conv(b, out, prefix + ".conv2", cout, cout, 3, 1, 1)
    out = batchnorm(b, out, prefix + ".bn2", cout)
    if stride != 1 or cin != cout:
        identity = conv(b, x, prefix + ".downsample.0", cin, cout, 1, stride, 0)
        identity = batchnorm(b, identity, prefix + ".downsample.1", cout)
    out = b.node("Add", scope_of(prefix), [out, identity])
    return relu(b, out, prefix + ".relu"), cout


def bottleneck(b, x, prefix, cin, planes, stride):
    width, cout = planes, planes * 4
    identity = x
    out = conv(b, x, prefix + ".conv1", cin, width, 1)
    out = batchnorm(b, out, prefix + ".bn1", width)
    out = relu(b, out, prefix + ".relu")
    # torchvision v1.5: the stride sits on the 3x3 conv
    out = conv(b, out, prefix + ".conv2", width, width, 3, stride, 1)
    out = batchnorm(b, out, prefix + ".bn2", width)
    out = relu(b, out, prefix + ".relu")
    out = conv(b, out, prefix + ".conv3", width, cout, 1)
    out = batchnorm(b, out, prefix + ".bn3", cout)
    if stride != 1 or cin != cout:
        identity = conv(b, x, prefix + ".downsample.0", cin, cout, 1, stride, 0)
        identity = batchnorm(b, identity, prefix + ".downsample.1", cout)
    out = b.node("Add", scope_of(prefix), [out, identity])
    return relu(b, out, prefix + ".relu"), cout


def build_resnet(arch, num_classes, image_size, in_channels, seed):
    kind, layers = ARCHS[arch]
    b = GraphBuilder(np.random.default_rng(seed))
    x = "input"
    if arch == "tiny":
        # 3x3 stride-1 stem, no max pool: keeps 28x28 inputs meaningful.
        x = conv(b, x, "conv1", in_channels, 16, 3, 1, 1)
        x = batchnorm(b, x, "bn1", 16)
        x = relu(b, x, "relu")
        widths, c = [16, 32], 16
    else:
        x = conv(b, x, "conv1", in_channels, 64, 7, 2, 3)
        x = batchnorm(b, x, "bn1", 64)
        x = relu(b, x, "relu")
        x = b.node("MaxPool", b.scope("maxpool"), [x], ceil_mode=0, dilations=[1, 1],
                   kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
        widths, c = [64, 128, 256, 512][: len(layers)], 64
    block = basic_block if kind == "basic" else bottleneck
    for stage, (planes, n) in enumerate(zip(widths, layers)):
        for i in range(n):
            stride = 2 if (stage > 0 and i == 0) else 1
            x, c = block(b, x, "layer%d.%d" % (stage + 1, i), c, planes, stride)
    x = b.node("GlobalAveragePool", b.scope("avgpool"), [x])
    x = b.node("Flatten", "", [x], axis=1)
    # nn.Linear default init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
    bound = 1.0 / np.sqrt(c)
    w = b.param("fc.weight", b.rng.uniform(-bound, bound, (num_classes, c)))
    bias = b.param("fc.bias", b.rng.uniform(-bound, bound, (num_classes,)))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["output"], name="/fc/Gemm",
                                    alpha=1.0, beta=1.0, transB=1))
    inputs = [helper.make_tensor_value_info(
        "input", TensorProto.FLOAT, ["batch", in_channels, image_size, image_size])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                             ["batch", num_classes])]
    return b, inputs, outputs


# ---------------------------------------------------------------------------
# Shared helpers (also used by mlp.py)
# ---------------------------------------------------------------------------

def add_common_args(p):
    p.add_argument("--num-classes", type=int, default=None)
    p.add_argument("--image-size", type=int, default=None)
    p.add_argument("--in-channels", type=int, default=None)
    p.add_argument("--weights", choices=["random", "none"], default="random",
                   help="random: seeded values stored in the model; none: every "
                        "initializer points at <stem>.weights.bin, which is not written")
    p.add_argument("--external-data", action="store_true",
                   help="with --weights random: write the values to <stem>.weights.bin")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True)


def weights_file_name(out_path):
    stem = os.path.splitext(os.path.basename(out_path))[0]
    return stem + ".weights.bin"


def make_model(graph_name, builder, inputs, outputs, weights, out_path,
               doc=""):
    """Assemble the ModelProto. With weights == "none" the initializers carry
    dims and type only, and external-data entries naming a file that does not
    exist (offsets as if the file held the float32 values back to back)."""
    inits = []
    location = weights_file_name(out_path)
    offset = 0
    for name, array in builder.initializers:
        if weights == "none":
            t = TensorProto()
            t.name = name
            t.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
            t.dims.extend(array.shape)
            t.data_location = TensorProto.EXTERNAL
            length = array.nbytes
            for k, v in (("location", location), ("offset", str(offset)),
                         ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v
            offset += length
            inits.append(t)
        else:
            inits.append(numpy_helper.from_array(array, name))
    graph = helper.make_graph(builder.nodes, graph_name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="castor-models", producer_version="1",
                              doc_string=doc)
    model.ir_version = IR_VERSION
    return model


def save_model(model, out_path, weights, external_data):
    d = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(d, exist_ok=True)
    if weights == "random" and external_data:
        location = weights_file_name(out_path)
        bin_path = os.path.join(d, location)
        if os.path.exists(bin_path):
            os.remove(bin_path)  # the writer appends
        onnx.save_model(model, out_path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=location,
                        size_threshold=0)
    else:
        onnx.save_model(model, out_path)


def bn_eval_copy(model):
    """A copy with every BatchNormalization in inference form (training_mode=0,
    one output): onnxruntime's inference build does not run training-mode BN."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        if n.op_type == "BatchNormalization":
            for a in n.attribute:
                if a.name == "training_mode":
                    a.i = 0
            del n.output[1:]
        elif n.op_type == "Dropout":
            # inference: drop training_mode input and mask output
            del n.input[2:]
            del n.output[1:]
    return m


def check_graph_only(model, model_dir, weights):
    """onnx.checker on the proto. The checker resolves external-data locations
    against the working directory and insists that the file exists; with
    --weights none the file deliberately does not, so the check then runs in a
    scratch directory holding an empty stand-in of that name (the checker looks
    at the file's existence only, never at its bytes)."""
    import tempfile
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if weights == "none":
                os.chdir(tmp)
                for loc in {e.value for t in model.graph.initializer
                            for e in t.external_data if e.key == "location"}:
                    open(loc, "wb").close()
            else:
                os.chdir(model_dir)
            onnx.checker.check_model(model, full_check=False)
        finally:
            os.chdir(cwd)


def check_and_run(out_path, weights, batch=2):
    """check_model on every file; with real weights, one onnxruntime run."""
    model = onnx.load(out_path, load_external_data=False)
    check_graph_only(model, os.path.dirname(os.path.abspath(out_path)), weights)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    if weights != "random":
        return None
    import onnxruntime as ort
    full = onnx.load(out_path)  # pulls external data in, if any
    shape = [d.dim_value if d.HasField("dim_value") else batch
             for d in full.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    try:
        sess = ort.InferenceSession(full.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        how = "as written (training mode)"
    except Exception:  # noqa: BLE001 -- ORT refused the training-mode graph
        sess = None
    if sess is not None:
        try:
            y = sess.run(None, {full.graph.input[0].name: x})[0]
        except Exception:  # noqa: BLE001
            sess = None
    if sess is None:
        # onnxruntime's inference build refuses training-mode BatchNormalization
        # (and training-mode Dropout); run the same graph in inference form.
        sess = ort.InferenceSession(bn_eval_copy(full).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        y = sess.run(None, {full.graph.input[0].name: x})[0]
        how = "in inference form (training_mode=0)"
    if not np.all(np.isfinite(y)):
        raise SystemExit("onnxruntime produced non-finite outputs")
    return "onnxruntime ran %s: output %s" % (how, list(y.shape))


def resolve_defaults(args, defaults):
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)


def finish(model, args, what):
    save_model(model, args.output, args.weights, args.external_data)
    note = check_and_run(args.output, args.weights)
    size = os.path.getsize(args.output)
    print("wrote %s (%s, %d nodes, %d initializers, %d bytes)%s" % (
        args.output, what, len(model.graph.node), len(model.graph.initializer), size,
        "; " + note if note else "; check_model ok"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=sorted(ARCHS), default="resnet50")
    p.add_argument("--activation", choices=["relu", "relu6", "silu"], default="relu",
                   help="relu6: every ReLU a Clip(0, 6), as torch exports nn.ReLU6; silu: x * Sigmoid(x), as nn.SiLU")
    add_common_args(p)
    args = p.parse_args(argv)
    global ACTIVATION
    ACTIVATION = args.activation
    resolve_defaults(args, dict(DEFAULTS, **ARCH_DEFAULTS.get(args.arch, {})))
    if args.external_data and args.weights != "random":
        p.error("--external-data needs --weights random")
    b, inputs, outputs = build_resnet(args.arch, args.num_classes, args.image_size,
                                      args.in_channels, args.seed)
    model = make_model("main_graph", b, inputs, outputs, args.weights, args.output,
                       doc="%s, %d classes, %dx%dx%d input, weights=%s" % (
                           args.arch, args.num_classes, args.in_channels,
                           args.image_size, args.image_size, args.weights))
    finish(model, args, args.arch)


if __name__ == "__main__":
    sys.exit(main())
