"""The cases of run_op_models.py: one-op (or few-op) ONNX models with their inputs, or a form the
importer must refuse with the texts its message must hold."""
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
OPSET = 21  # the newest opset Castor imports


@dataclass
class Case:
    name: str
    model: Callable
    feeds: Dict[str, np.ndarray]
    refusal: Optional[List[str]] = None  # texts the compile error must contain


def graph_model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    """inputs/outputs: {name: shape}; initializers: {name: array}."""
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


def cases():
    rng = np.random.default_rng(41)
    return activation_cases(rng) + prelu_cases(rng)
