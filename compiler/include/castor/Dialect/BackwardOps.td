//===- BackwardOps.td - castor ops that reverse-mode autodiff emits ------===//
//
// Gradients of the forward ops. Result types are explicit where the operands do not fix them
// (a data gradient has the forward input's shape); verifiers check them against the forward
// shape rules, so a backward op can only exist for a valid forward op.
//
//===----------------------------------------------------------------------===//

#ifndef CASTOR_BACKWARD_OPS_TD
#define CASTOR_BACKWARD_OPS_TD

include "castor/Dialect/CastorEnums.td"
include "castor/Dialect/CastorInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Castor_BackwardOp<string mnemonic, list<Trait> traits = []>
    : Castor_Op<mnemonic, !listconcat([Pure, Castor_KernelOpInterface], traits)>;

def Castor_Conv2dBackwardDataOp : Castor_BackwardOp<"conv2d_backward_data"> {
  let summary = "gradient of conv2d with respect to its input";
  let description = [{
    `output_grad` [N, K, P, Q] and `filter` [K, C/groups, R, S] give the input gradient
    [N, C, H, W]; the attributes are the forward convolution's. With `accumulate` (the input
    gradient's type), the result is that gradient, rounded to its element type, plus
    `accumulate`: the other gradient of an input with several users, added by the convolution's
    kernel where the GPU library can (castor-fuse-gradient-add).

    ```mlir
    %dx = castor.conv2d_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>}
        : (tensor<2x8x6x6xf32>, tensor<8x4x3x3xf32>) -> tensor<2x4x6x6xf32>
    %sum = castor.conv2d_backward_data %dy, %w accumulate(%g)
        : (tensor<2x8x6x6xf32>, tensor<8x4x3x3xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, Castor_FloatTensor:$filter,
                       Optional<Castor_FloatTensor>:$accumulate,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Castor_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $output_grad `,` $filter (`accumulate` `(` $accumulate^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Castor_Conv2dBackwardFilterOp : Castor_BackwardOp<"conv2d_backward_filter"> {
  let summary = "gradient of conv2d with respect to its filter";
  let description = [{
    ```mlir
    %dw = castor.conv2d_backward_filter %x, %dy {pads = array<i64: 1, 1, 1, 1>}
        : (tensor<2x4x6x6xf32>, tensor<2x8x6x6xf32>) -> tensor<8x4x3x3xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Castor_FloatTensor:$output_grad,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Castor_FloatTensor:$filter_grad);
  let assemblyFormat = "$input `,` $output_grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_Conv2dBackwardBiasOp : Castor_BackwardOp<"conv2d_backward_bias", [InferTypeOpAdaptor]> {
  let summary = "gradient of conv2d with respect to its bias: a sum over N, P, Q";
  let description = [{
    ```mlir
    %db = castor.conv2d_backward_bias %dy : (tensor<2x8x6x6xf32>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad);
  let results = (outs Castor_FloatTensor:$bias_grad);
  let assemblyFormat = "$output_grad attr-dict `:` functional-type(operands, results)";
}

def Castor_BatchNormTrainingBackwardOp : Castor_BackwardOp<"batch_norm_training_backward", [InferTypeOpAdaptor]> {
  let summary = "gradients of batch_norm_training";
  let description = [{
    From the output gradient, the forward input, scale and the saved batch mean and inverse
    standard deviation: the gradients of input, scale and bias. `output_grad`, `input` and
    `input_grad` share one element type, the per-channel operands and their gradients another,
    by batch_norm_training's rule (f16 or bf16 data with f32 parameters for mixed BatchNorm).

    ```mlir
    %dx, %dg, %db = castor.batch_norm_training_backward %dy, %x, %g, %mean, %invstd
        : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
        -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, Castor_FloatTensor:$input, Castor_FloatTensor:$scale,
                       Castor_FloatTensor:$batch_mean, Castor_FloatTensor:$batch_inv_std,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon, UnitAttr:$sync);
  let results = (outs Castor_FloatTensor:$input_grad, Castor_FloatTensor:$scale_grad,
                      Castor_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $output_grad `,` $input `,` $scale `,` $batch_mean `,` $batch_inv_std attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_LayerNormBackwardOp : Castor_BackwardOp<"layer_norm_backward", [InferTypeOpAdaptor]> {
  let summary = "gradients of layer_norm";
  let description = [{
    From the output gradient, the forward input, scale and the saved mean and inverse standard
    deviation: the gradients of input, scale and bias, with layer_norm's element-type rule.

    ```mlir
    %dx, %dg, %db = castor.layer_norm_backward %dy, %x, %g, %mean, %invstd {axis = -1 : i64}
        : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>)
        -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, Castor_FloatTensor:$input, Castor_FloatTensor:$scale,
                       Castor_FloatTensor:$mean, Castor_FloatTensor:$inv_std, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Castor_FloatTensor:$input_grad, Castor_FloatTensor:$scale_grad,
                      Castor_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $output_grad `,` $input `,` $scale `,` $mean `,` $inv_std attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_AttentionBackwardOp : Castor_BackwardOp<"attention_backward", [InferTypeOpAdaptor]> {
  let summary = "gradients of attention with respect to q, k and v";
  let description = [{
    From attention's operands, its output and saved log-sum-exp, and the output gradient; the
    probabilities are computed again from the log-sum-exp.

    ```mlir
    %dq, %dk, %dv = castor.attention_backward %q, %k, %v, %o, %lse, %do {scale = 1.250000e-01 : f64}
        : (tensor<2x3x5x8xf16>, tensor<2x3x5x8xf16>, tensor<2x3x5x8xf16>, tensor<2x3x5x8xf16>,
           tensor<2x3x5x1xf32>, tensor<2x3x5x8xf16>)
        -> (tensor<2x3x5x8xf16>, tensor<2x3x5x8xf16>, tensor<2x3x5x8xf16>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$q, Castor_FloatTensor:$k, Castor_FloatTensor:$v,
                       Castor_FloatTensor:$output, Castor_FloatTensor:$stats, Castor_FloatTensor:$output_grad,
                       F64Attr:$scale);
  let results = (outs Castor_FloatTensor:$q_grad, Castor_FloatTensor:$k_grad, Castor_FloatTensor:$v_grad);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $output `,` $stats `,` $output_grad attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_MaxPool2dBackwardOp : Castor_BackwardOp<"max_pool2d_backward", [AllTypesMatch<["input", "input_grad"]>]> {
  let summary = "routes each window's gradient to its first maximum";
  let description = [{
    ```mlir
    %dx = castor.max_pool2d_backward %dy, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
        : (tensor<1x4x4x4xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, Castor_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
  let results = (outs Castor_FloatTensor:$input_grad);
  let assemblyFormat = "$output_grad `,` $input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_AvgPool2dBackwardOp : Castor_BackwardOp<"avg_pool2d_backward"> {
  let summary = "spreads each window's gradient over the window";
  let description = [{
    ```mlir
    %dx = castor.avg_pool2d_backward %dy {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
        : (tensor<1x4x4x4xf32>) -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad,
                       DenseI64ArrayAttr:$kernel,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$pads,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs Castor_FloatTensor:$input_grad);
  let assemblyFormat = "$output_grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_GlobalAvgPoolBackwardOp : Castor_BackwardOp<"global_avg_pool_backward"> {
  let summary = "spreads dy / (spatial size) over the spatial dimensions";
  let description = [{
    ```mlir
    %dx = castor.global_avg_pool_backward %dy : (tensor<2x8x1x1xf32>) -> tensor<2x8x7x7xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad);
  let results = (outs Castor_FloatTensor:$input_grad);
  let assemblyFormat = "$output_grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_SoftmaxBackwardOp : Castor_BackwardOp<"softmax_backward", [AllTypesMatch<["output_grad", "input_grad"]>]> {
  let summary = "y * (dy - sum(dy * y, axis)) of the forward output y";
  let description = [{
    ```mlir
    %dx = castor.softmax_backward %dy, %y {axis = 1 : i64} : (tensor<2x10xf32>, tensor<2x10xf32>) -> tensor<2x10xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, Castor_FloatTensor:$output,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Castor_FloatTensor:$input_grad);
  let assemblyFormat = "$output_grad `,` $output attr-dict `:` functional-type(operands, results)";
}

def Castor_SoftmaxCrossEntropyBackwardOp
    : Castor_BackwardOp<"softmax_cross_entropy_backward", [AllTypesMatch<["logits", "logits_grad"]>]> {
  let summary = "gradient of softmax_cross_entropy with respect to the logits";
  let description = [{
    `loss_grad` is [] for a mean or sum reduction and [N] for none; the attributes are the
    forward loss's. The loss scaler later feeds its scale as `loss_grad`.

    ```mlir
    %dl = castor.softmax_cross_entropy_backward %one, %logits, %labels
        : (tensor<f32>, tensor<8x10xf32>, tensor<8xi64>) -> tensor<8x10xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$loss_grad, Castor_FloatTensor:$logits, Castor_IndexTensor:$labels,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing,
                       DefaultValuedAttr<Castor_ReductionAttr, "::castor::Reduction::mean">:$reduction);
  let results = (outs Castor_FloatTensor:$logits_grad);
  let assemblyFormat = "$loss_grad `,` $logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_DropoutBackwardOp : Castor_BackwardOp<"dropout_backward", [AllTypesMatch<["output_grad", "input_grad"]>]> {
  let summary = "applies the forward dropout's mask and scale to the gradient";
  let description = [{
    ```mlir
    %dx = castor.dropout_backward %dy, %it {ratio = 2.0e-01 : f64, salt = 1 : i64}
        : (tensor<8x64xf32>, tensor<i64>) -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, Castor_IndexTensor:$iteration,
                       DefaultValuedAttr<F64Attr, "0.5">:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       DefaultValuedAttr<I64Attr, "0">:$salt,
                       UnitAttr:$per_sample);
  let results = (outs Castor_FloatTensor:$input_grad);
  let assemblyFormat = "$output_grad `,` $iteration attr-dict `:` functional-type(operands, results)";
}

def Castor_ReduceSumToOp : Castor_BackwardOp<"reduce_sum_to"> {
  let summary = "sums the dimensions that broadcasting expanded, times `scale`";
  let description = [{
    The gradient of a broadcast: the result's shape broadcasts to the operand's.

    ```mlir
    %db = castor.reduce_sum_to %dy : (tensor<8x10xf32>) -> tensor<10xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_SplitOp : Castor_BackwardOp<"split"> {
  let summary = "slices along `axis`, the inverse of concat";
  let description = [{
    ```mlir
    %a, %b = castor.split %x {axis = 1 : i64} : (tensor<1x6x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x2x2xf32>)
    ```
  }];
  let arguments = (ins Castor_AnyTensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Castor_AnyTensor>:$outputs);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_SliceBackwardOp : Castor_BackwardOp<"slice_backward"> {
  let summary = "gradient of slice: the output gradient placed in zeros of the input's shape";
  let description = [{
    The attributes are the forward slice's; the result type is the forward input's.

    ```mlir
    %dx = castor.slice_backward %dy {starts = array<i64: 0, 58>, ends = array<i64: 2, 116>, steps = array<i64: 1, 1>}
        : (tensor<2x58xf32>) -> tensor<2x116xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$ends,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Castor_FloatTensor:$input_grad);
  let assemblyFormat = "$output_grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_CountCorrectOp : Castor_BackwardOp<"count_correct", [InferTypeOpAdaptor]> {
  let summary = "how many rows' argmax equals the label";
  let description = [{
    ```mlir
    %n = castor.count_correct %logits, %labels : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<i64>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$logits, Castor_IndexTensor:$labels);
  let results = (outs Castor_IndexTensor:$count);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
}

#endif // CASTOR_BACKWARD_OPS_TD
