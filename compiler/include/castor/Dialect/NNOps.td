//===- NNOps.td - castor forward ops with window or contraction shape rules ===//
//
// Convolution, normalisation, pooling, matrix products, softmax and the loss. Every op here
// infers its result types from the shared shape rules (runtime/include/castor/shape_rules.h);
// the verifier compares the declared types against the inferred ones, so the two cannot drift.
//
//===----------------------------------------------------------------------===//

#ifndef CASTOR_NN_OPS_TD
#define CASTOR_NN_OPS_TD

include "castor/Dialect/CastorEnums.td"
include "castor/Dialect/CastorInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Castor_Conv2dOp : Castor_Op<"conv2d", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_RecomputeOpInterface, ["getRecomputeFlopsPerElement", "isCheapToRecompute"]>, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "2-D convolution (cross-correlation) in NCHW";
  let description = [{
    `input` is [N, C, H, W], `filter` is [K, C/groups, R, S], the optional `bias` is [K]; the
    result is [N, K, P, Q]. `pads` are [top, left, bottom, right]. Operands share one
    floating-point element type.

    ```mlir
    %y = castor.conv2d %x, %w {pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>}
        : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x112x112xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Castor_FloatTensor:$filter,
                       Optional<Castor_FloatTensor>:$bias,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = [{
    $input `,` $filter (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_BatchNormTrainingOp : Castor_Op<"batch_norm_training", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_RecomputeOpInterface, ["buildRecompute", "getRecomputeFlopsPerElement"]>, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "batch normalisation with batch statistics (training form)";
  let description = [{
    Normalises `input` [N, C, ...] per channel with the mean and biased variance of the batch,
    then applies `scale` and `bias` ([C]). Returns the output, the batch mean and the batch
    inverse standard deviation 1/sqrt(var + epsilon), which the backward pass reuses.
    The output has the input's element type. `scale`, `bias` and the running statistics share
    one element type, the input's or, for f16 or bf16 input, f32 ("mixed" BatchNorm, as PyTorch
    AMP runs it: low-precision activations, fp32 parameters and statistics, fp32 arithmetic);
    the batch statistics have their type. The optional `running_stats` (running mean, running variance)
    name the buffers this layer keeps; they do not enter the computation, and the training
    step updates them with `momentum` (PyTorch's convention). With `sync` the statistics are those
    of every data-parallel replica's batch together (SyncBatchNorm; castor-data-parallel).

    ```mlir
    %y, %mean, %invstd = castor.batch_norm_training %x, %gamma, %beta running(%rm, %rv)
        : (tensor<8x64x56x56xf16>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> (tensor<8x64x56x56xf16>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Castor_FloatTensor:$scale, Castor_FloatTensor:$bias,
                       Variadic<Castor_FloatTensor>:$running_stats,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       UnitAttr:$sync);
  let results = (outs Castor_FloatTensor:$output, Castor_FloatTensor:$batch_mean,
                      Castor_FloatTensor:$batch_inv_std);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias (`running` `(` $running_stats^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_LayerNormOp : Castor_Op<"layer_norm", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    As ONNX LayerNormalization: normalises `input` over the dimensions from `axis` on with the
    mean and biased variance of each row, then applies `scale` and `bias` (those dimensions).
    Returns the output, the mean and the inverse standard deviation 1/sqrt(var + epsilon)
    (shape: the dimensions before `axis`, then 1s), which the backward pass reuses. Element
    types follow batch_norm_training's rule: f16 or bf16 input with f32 parameters and
    statistics, arithmetic in fp32 (as PyTorch AMP runs layer_norm).

    ```mlir
    %y, %mean, %invstd = castor.layer_norm %x, %g, %b {axis = -1 : i64}
        : (tensor<2x197x768xf16>, tensor<768xf32>, tensor<768xf32>)
        -> (tensor<2x197x768xf16>, tensor<2x197x1xf32>, tensor<2x197x1xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Castor_FloatTensor:$scale, Castor_FloatTensor:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis, DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Castor_FloatTensor:$output, Castor_FloatTensor:$mean, Castor_FloatTensor:$inv_std);
  let assemblyFormat = "$input `,` $scale `,` $bias attr-dict `:` functional-type(operands, results)";
}

def Castor_BatchNormApplyOp : Castor_Op<"batch_norm_apply", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_RecomputeOpInterface, ["getRecomputeFlopsPerElement"]>, InferTypeOpAdaptor]> {
  let summary = "batch normalisation with given batch statistics, then an optional residual add and relu";
  let description = [{
    `(input - batch_mean) * batch_inv_std * scale + bias`, rounded to the input's element type,
    then `+ residual` (rounded again) when given, then `max(., 0)` when `relu` is set, or
    `clip(., 0, clip_max)` with `clip_max` (ReLU6; `relu` set, no residual): the output of
    batch_norm_training (or batch_norm_relu_training) computed again from the statistics that
    op returned, bit for bit. The recompute pass emits it in the backward so
    that the forward's normalised value need not stay alive. Types follow
    batch_norm_training's rule.

    ```mlir
    %y = castor.batch_norm_apply %x, %gamma, %beta, %mean, %invstd residual(%z) {relu = true}
        : (tensor<8x64x56x56xf16>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>,
           tensor<8x64x56x56xf16>) -> tensor<8x64x56x56xf16>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Castor_FloatTensor:$scale, Castor_FloatTensor:$bias,
                       Castor_FloatTensor:$batch_mean, Castor_FloatTensor:$batch_inv_std,
                       Optional<Castor_FloatTensor>:$residual,
                       DefaultValuedAttr<BoolAttr, "false">:$relu, OptionalAttr<F64Attr>:$clip_max);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `,` $batch_mean `,` $batch_inv_std (`residual` `(` $residual^ `)`)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Castor_BatchNormInferenceOp : Castor_Op<"batch_norm_inference", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "batch normalisation with running statistics (inference form)";
  let description = [{
    y = scale * (input - mean) / sqrt(variance + epsilon) + bias, per channel of
    `input` [N, C, ...]; the four per-channel operands are [C] and share one element type:
    the input's or, for f16 or bf16 input, f32 (as in batch_norm_training). The output has the
    input's element type.

    Differentiated with the statistics frozen (PyTorch's BatchNorm in eval mode, the fine-tuning
    case): the input, scale and bias get gradients, the mean and variance none
    (castor-batch-norm-form refuses statistics that are trainable parameters).

    ```mlir
    %y = castor.batch_norm_inference %x, %gamma, %beta, %mean, %var {epsilon = 1.0e-05 : f64}
        : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Castor_FloatTensor:$scale, Castor_FloatTensor:$bias,
                       Castor_FloatTensor:$mean, Castor_FloatTensor:$variance,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `,` $mean `,` $variance attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_MaxPool2dOp : Castor_Op<"max_pool2d", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "2-D max pooling in NCHW";
  let description = [{
    Padding never wins the maximum (it acts as -inf). `pads` are [top, left, bottom, right].

    ```mlir
    %y = castor.max_pool2d %x {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>,
                               strides = array<i64: 2, 2>}
        : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Castor_AvgPool2dOp : Castor_Op<"avg_pool2d", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "2-D average pooling in NCHW";
  let description = [{
    With `count_include_pad` the divisor is the full kernel area, otherwise the number of
    input elements under the window. `pads` are [top, left, bottom, right].

    ```mlir
    %y = castor.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
        : (tensor<1x128x56x56xf32>) -> tensor<1x128x28x28xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Castor_GlobalAvgPoolOp : Castor_Op<"global_avg_pool", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "mean over all spatial dimensions, kept as size-1 dimensions";
  let description = [{
    ```mlir
    %y = castor.global_avg_pool %x : (tensor<1x2048x7x7xf32>) -> tensor<1x2048x1x1xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Castor_GemmOp : Castor_Op<"gemm", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "general matrix product alpha * op(A) op(B) + beta * C";
  let description = [{
    As ONNX Gemm: `a` and `b` are rank 2, optionally transposed; `c` broadcasts to the result.

    ```mlir
    %y = castor.gemm %x, %w, %b {trans_b = true}
        : (tensor<1x2048xf32>, tensor<1000x2048xf32>, tensor<1000xf32>) -> tensor<1x1000xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$a, Castor_FloatTensor:$b, Optional<Castor_FloatTensor>:$c,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_b,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                       DefaultValuedAttr<F64Attr, "1.0">:$beta);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_MatmulOp : Castor_Op<"matmul", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "matrix product with numpy semantics";
  let description = [{
    As ONNX MatMul: rank-1 operands are promoted, batch dimensions broadcast.

    ```mlir
    %y = castor.matmul %x, %w : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$a, Castor_FloatTensor:$b);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$a `,` $b attr-dict `:` functional-type(operands, results)";
}

def Castor_AttentionOp : Castor_Op<"attention", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention, softmax(scale q k^T) v, in one kernel";
  let description = [{
    q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv] give the output [B, H, Sq, Dv] and the
    log-sum-exp of each row of the scaled scores, [B, H, Sq, 1] in f32, which the backward
    reuses instead of keeping the [Sq, Sk] probabilities (flash attention). castor-fuse-attention
    writes it for the exporters' matmul-softmax-matmul chain; the CUDA backend runs it through
    cuDNN's fused attention (f16 and bf16).

    ```mlir
    %o, %lse = castor.attention %q, %k, %v {scale = 1.250000e-01 : f64}
        : (tensor<2x12x197x64xf16>, tensor<2x12x197x64xf16>, tensor<2x12x197x64xf16>)
        -> (tensor<2x12x197x64xf16>, tensor<2x12x197x1xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$q, Castor_FloatTensor:$k, Castor_FloatTensor:$v, F64Attr:$scale);
  let results = (outs Castor_FloatTensor:$output, Castor_FloatTensor:$stats);
  let assemblyFormat = "$q `,` $k `,` $v attr-dict `:` functional-type(operands, results)";
}

def Castor_SoftmaxOp : Castor_Op<"softmax", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "softmax along one axis";
  let description = [{
    ```mlir
    %p = castor.softmax %logits {axis = 1 : i64} : (tensor<8x10xf32>) -> tensor<8x10xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Castor_SoftmaxCrossEntropyOp : Castor_Op<"softmax_cross_entropy", [Pure, Castor_KernelOpInterface, DeclareOpInterfaceMethods<Castor_PrecisionOpInterface, ["getPrecisionClass"]>, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "softmax cross-entropy of logits against integer class labels";
  let description = [{
    `logits` is [N, C], `labels` is [N] of i64 class indices. With `label_smoothing` s the
    target distribution is (1 - s) on the label plus s / C everywhere, as in PyTorch's
    `cross_entropy`. The `reduction` (mean, sum or none) gives a scalar or an [N] result.

    ```mlir
    %loss = castor.softmax_cross_entropy %logits, %labels {label_smoothing = 1.0e-01 : f64}
        : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$logits, Castor_IndexTensor:$labels,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing,
                       DefaultValuedAttr<Castor_ReductionAttr, "::castor::Reduction::mean">:$reduction);
  let results = (outs Castor_FloatTensor:$loss);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
}

#endif // CASTOR_NN_OPS_TD
