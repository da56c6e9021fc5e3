"""run_op_models.py's Einsum cases: the contractions attention, MLP-Mixer and linear layers are
written as (batched matmuls with transposed operands, a weight as one operand, ellipsis batches
with broadcasting), one-operand transposes and sums, ONNX's Einsum node tests (declared opset 12)
declared opset 13, and the forms the importer refuses."""
import glob
import os

import numpy as np
import onnx
from onnx import helper

from op_model_cases import Case, graph_model, node_test_dir, read_tensor


def einsum_case(name, equation, shapes, rng, weights=(), refusal=None, by_numpy=False, declare_output=True):
    """Operands x0, x1, ... of `shapes`; those whose index is in `weights` are initializers (a
    trained weight). The expected output is onnxruntime's or, `by_numpy`, NumPy's where
    onnxruntime fails on what ONNX allows (ellipses of different ranks; a sum then a transpose of
    one operand; a size-1 dimension
    broadcast against the other operand's, where ONNX's shape inference takes the first operand's
    size: `declare_output` False leaves the output's dimensions symbolic for its checker)."""
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"x{i}" for i in range(len(shapes))]
    inputs = {n: list(v.shape) for i, (n, v) in enumerate(zip(names, values)) if i not in weights}
    inits = {n: v for i, (n, v) in enumerate(zip(names, values)) if i in weights}
    out = None if refusal is not None else list(np.einsum(equation, *values).shape)
    if out is not None and not declare_output:
        out = [f"d{i}" for i in range(len(out))]
    node = helper.make_node("Einsum", names, ["y"], name="/Einsum_0", equation=equation)
    feeds = {n: v for n, v in zip(names, values) if n in inputs}
    expected = (lambda feeds: [np.einsum(equation, *values)]) if by_numpy else None
    return Case(name, lambda: graph_model([node], inputs, {"y": out}, inits), feeds if refusal is None else {},
                refusal=refusal, expected=expected)


def node_test_redeclared(name, opset=13):
    """ONNX's node test `name` (declared opset 12, before Castor's range) declared `opset`, where
    the op is the same, with its own inputs and expected outputs."""
    data = os.path.join(node_test_dir(name), "test_data_set_0")
    inputs = [read_tensor(p) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    expected = [read_tensor(p) for p in sorted(glob.glob(os.path.join(data, "output_*.pb")))]
    names = [i.name for i in onnx.load(os.path.join(node_test_dir(name), "model.onnx")).graph.input]

    def model():
        m = onnx.load(os.path.join(node_test_dir(name), "model.onnx"))
        m.opset_import[0].version = opset
        return m

    return Case(f"{name}_opset{opset}", model, dict(zip(names, inputs)), expected=lambda feeds: expected)


def cases(rng):
    def case(name, equation, *shapes, **kw):
        return einsum_case(name, equation, shapes, rng, **kw)

    return [
        # Attention: scores q k^T and the weighted sum of v, per batch and head.
        case("einsum_attention_scores", "bhid,bhjd->bhij", (2, 3, 4, 5), (2, 3, 6, 5)),
        case("einsum_attention_values", "bhij,bhjd->bhid", (2, 3, 4, 6), (2, 3, 6, 5)),
        case("einsum_attention_scores_transposed_out", "bhid,bhjd->bhji", (2, 3, 4, 5), (2, 3, 6, 5)),
        case("einsum_batch_matmul", "bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
        case("einsum_batch_matmul_left_transposed", "bji,bjk->bik", (2, 4, 3), (2, 4, 5)),
        case("einsum_batch_matmul_right_transposed", "bij,bkj->bik", (2, 3, 4), (2, 5, 4)),
        case("einsum_batch_matmul_spaces", "b i j , b j k -> b i k", (2, 3, 4), (2, 4, 5)),
        case("einsum_ellipsis_matmul", "...ij,...jk->...ik", (2, 3, 3, 4), (2, 3, 4, 5)),
        case("einsum_ellipsis_broadcast", "...ij,...jk->...ik", (1, 3, 4), (2, 4, 5), declare_output=False,
             by_numpy=True),
        case("einsum_ellipsis_ranks_differ", "...ij,jk->...ik", (2, 3, 3, 4), (4, 5), by_numpy=True),
        # A linear layer's weight as one operand ([out, in] and [in, out]); Mixer's token mixing.
        case("einsum_linear_weight_out_in", "bnc,dc->bnd", (2, 3, 4), (5, 4), weights=(1,)),
        case("einsum_linear_weight_in_out", "bnc,cd->bnd", (2, 3, 4), (4, 5), weights=(1,)),
        case("einsum_weight_first", "dc,bnc->bdn", (5, 4), (2, 3, 4), weights=(0,)),
        case("einsum_token_mixing", "bsc,ts->btc", (2, 6, 4), (5, 6), weights=(1,)),
        case("einsum_implicit_output", "ij,jk", (3, 4), (4, 5)),
        case("einsum_inner_product", "i,i", (5,), (5,)),
        case("einsum_outer_product", "bi,bj->bij", (2, 3), (2, 4)),
        case("einsum_channel_weighted_sum", "nchw,nc->nhw", (2, 3, 4, 5), (2, 3)),
        case("einsum_summed_in_one_operand", "bij,bkl->bik", (2, 3, 4), (2, 5, 6)),
        case("einsum_size1_broadcast_label", "bij,bjk->bik", (1, 3, 4), (2, 4, 5), declare_output=False,
             by_numpy=True),
        # One operand: a transpose, a sum.
        case("einsum_nchw_to_nhwc", "bchw->bhwc", (2, 3, 4, 5)),
        case("einsum_transpose_implicit", "ji", (3, 4)),
        case("einsum_sum_rows", "ij->i", (3, 4)),
        case("einsum_sum_and_transpose", "bij->jb", (2, 3, 4), by_numpy=True),
        case("einsum_identity", "bij->bij", (2, 3, 4)),
        node_test_redeclared("test_einsum_batch_matmul"),
        node_test_redeclared("test_einsum_inner_prod"),
        node_test_redeclared("test_einsum_transpose"),
        node_test_redeclared("test_einsum_sum"),
        # Refused: diagonals and traces, more than two operands, sizes that do not broadcast, an
        # ellipsis dropped from the output, an output label no input has.
        case("einsum_diagonal_refused", "ii->i", (3, 3),
             refusal=["/Einsum_0", "Einsum", "label 'i' repeats in input 0 (a diagonal or trace), which is not "
                                             "supported"]),
        case("einsum_batch_diagonal_refused", "...ii->...i", (2, 3, 3),
             refusal=["/Einsum_0", "Einsum", "label 'i' repeats in input 0"]),
        case("einsum_three_operands_refused", "ij,jk,kl->il", (2, 3), (3, 4), (4, 5),
             refusal=["/Einsum_0", "Einsum", "an equation of 3 operands is not supported (one or two)"]),
        case("einsum_sizes_not_broadcasting_refused", "bij,bjk->bik", (2, 3, 4), (3, 4, 5),
             refusal=["/Einsum_0", "Einsum", "label 'b' has size 2 in input 0 and 3 in input 1, which do not "
                                             "broadcast"]),
        case("einsum_ellipsis_summed_refused", "...ij->ij", (2, 3, 4),
             refusal=["/Einsum_0", "Einsum", "the inputs have '...' dimensions and the output names none"]),
        case("einsum_unknown_output_label_refused", "ij->k", (2, 3),
             refusal=["/Einsum_0", "Einsum", "the output's label 'k' is in no input"]),
        case("einsum_rank_mismatch_refused", "ijk->kji", (2, 3),
             refusal=["/Einsum_0", "Einsum", "input 0 has rank 2 but its term names 3 axes"]),
    ]
