//===- FusedOps.td - castor ops that stand for a group of ops --------------===//
//
// The fusion pass (castor-fuse-batch-norm-relu) replaces groups of training-step ops by these:
// each computes what its group computes, so the runtime may run it as one fused kernel or as the
// group's kernels (runtime/plan/ops.md, "Fused kernels"). They appear after autodiff and have no
// VJP of their own. Types follow batch_norm_training's rule (castor/shape_rules.h).
//
//===----------------------------------------------------------------------===//

#ifndef CASTOR_FUSED_OPS_TD
#define CASTOR_FUSED_OPS_TD

include "castor/Dialect/CastorEnums.td"
include "castor/Dialect/CastorInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Castor_BatchNormReluTrainingOp : Castor_Op<"batch_norm_relu_training",
    [Pure, Castor_KernelOpInterface, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<Castor_RecomputeOpInterface, ["buildRecompute", "getRecomputeFlopsPerElement"]>]> {
  let summary = "batch_norm_training, an optional residual add, then relu (or ReLU6)";
  let description = [{
    `relu(batch_norm_training(input, scale, bias).output [+ residual])`, with the batch mean
    and inverse standard deviation as batch_norm_training returns them. The normalised value
    is rounded to the input's element type before the add, as in the unfused ops. `residual`
    has the input's type. With `clip_max` the activation is `clip` with min 0 and that max
    (ReLU6 for 6) instead of relu, and there is no residual.

    ```mlir
    %y, %mean, %invstd = castor.batch_norm_relu_training %x, %gamma, %beta residual(%z)
        : (tensor<8x64x56x56xf16>, tensor<64xf32>, tensor<64xf32>, tensor<8x64x56x56xf16>)
        -> (tensor<8x64x56x56xf16>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Castor_FloatTensor:$scale, Castor_FloatTensor:$bias,
                       Optional<Castor_FloatTensor>:$residual,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum, UnitAttr:$sync,
                       OptionalAttr<F64Attr>:$clip_max);
  let results = (outs Castor_FloatTensor:$output, Castor_FloatTensor:$batch_mean,
                      Castor_FloatTensor:$batch_inv_std);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias (`residual` `(` $residual^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Castor_BatchNormReluTrainingBackwardOp : Castor_Op<"batch_norm_relu_training_backward",
    [Pure, Castor_KernelOpInterface]> {
  let summary = "gradients of batch_norm_relu_training";
  let description = [{
    `g = relu_backward(output_grad, output)`, then batch_norm_training_backward of `g`: the
    gradients of input, scale and bias; with the optional fourth result, `g` itself, the
    gradient of the forward's residual. `bias` is not needed by the definition; GPU kernels
    that recompute the pre-activation read it. With `clip_max` (a forward with that clip_max),
    `g = clip_backward(output_grad, t)` with min 0 and max clip_max, where t is the forward's
    normalised value, recomputed from input, scale, bias and the statistics as batch_norm_apply
    computes it; there is no fourth result.

    ```mlir
    %dx, %dg, %db, %dz = castor.batch_norm_relu_training_backward %dy, %x, %y, %g, %b, %mean, %invstd
        : (tensor<8x64x4x4xf16>, tensor<8x64x4x4xf16>, tensor<8x64x4x4xf16>, tensor<64xf32>,
           tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> (tensor<8x64x4x4xf16>, tensor<64xf32>, tensor<64xf32>, tensor<8x64x4x4xf16>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$output_grad, Castor_FloatTensor:$input, Castor_FloatTensor:$output,
                       Castor_FloatTensor:$scale, Castor_FloatTensor:$bias, Castor_FloatTensor:$batch_mean,
                       Castor_FloatTensor:$batch_inv_std,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum, UnitAttr:$sync,
                       OptionalAttr<F64Attr>:$clip_max);
  let results = (outs Castor_FloatTensor:$input_grad, Castor_FloatTensor:$scale_grad,
                      Castor_FloatTensor:$bias_grad, Optional<Castor_FloatTensor>:$residual_grad);
  let assemblyFormat = [{
    $output_grad `,` $input `,` $output `,` $scale `,` $bias `,` $batch_mean `,` $batch_inv_std attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Castor_FusedElementwiseOp : Castor_Op<"fused_elementwise",
    [Pure, Castor_KernelOpInterface,
     DeclareOpInterfaceMethods<Castor_RecomputeOpInterface, ["getRecomputeFlopsPerElement", "buildRecompute"]>]> {
  let summary = "a group of element-wise ops that runs as one generated kernel";
  let description = [{
    What castor-fuse-elementwise makes of a group of element-wise ops (add, mul, cast, the
    unary ops of ElementwiseOps.td and their gradients): `program` lists the group's ops over
    the inputs `i0, i1, ...` in the text form of runtime/plan/elementwise_program.h, and `out`
    names the values the results are. Every result has one shape, the domain; each input
    broadcasts to it as in NumPy. Each value is computed and rounded to its element type as the
    op alone would be, so the group computes exactly what its ops compute. An output may be a
    reduction of a value instead (`sum(t2)[0,2,3]`, `mean(t1)[2,3]`: reduce_sum_to and
    global_avg_pool joined to the group), whose shape broadcasts to the domain along the listed
    axes. The verifier reads the program with the plan library's parser, the one the runtime
    validates plans with. A group is cheap to recompute (castor-recompute runs it again for the
    value the backward reads); its copy leaves out the reductions, whose results are never
    recomputed (they are small, and recomputing one walks the whole domain again).

    ```mlir
    %y, %s = castor.fused_elementwise(%x) {program = "t0 = sigmoid(i0) : f16\nt1 = mul(i0, t0) : f16\nout t1, t0\n"}
        : (tensor<8x32x16x16xf16>) -> (tensor<8x32x16x16xf16>, tensor<8x32x16x16xf16>)
    ```
  }];
  let arguments = (ins Variadic<Castor_FloatTensor>:$inputs, StrAttr:$program);
  let results = (outs Variadic<Castor_FloatTensor>:$outputs);
  let assemblyFormat = "`(` $inputs `)` attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

#endif // CASTOR_FUSED_OPS_TD
