//===- ElementwiseOps.td - unary element-wise ops and their gradients ----===//
//
// Each unary element-wise op is one `defm`: the forward op `mnemonic` and its gradient
// `mnemonic_backward`(dy, saved) -> dx, which takes the forward's attributes and, as `saved`,
// the forward's input or, with savesOutput, its output. What both compute is the struct of the
// same name in runtime/plan/elementwise_ops.h, the one source of the formulas: the dialect only
// declares the ops, and the VJP (buildElementwiseVjp, Autodiff.h) is the same for all of them.

#ifndef CASTOR_ELEMENTWISE_OPS_TD
#define CASTOR_ELEMENTWISE_OPS_TD

include "castor/Dialect/CastorEnums.td"
include "castor/Dialect/CastorInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

multiclass Castor_Elementwise<string mnemonic, string summaryText, dag attributes, bit savesOutput,
                              string example, bit verifier = 0> {
  def Op : Castor_Op<mnemonic, [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface,
                                Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>,
                                SameOperandsAndResultType]> {
    let summary = summaryText;
    let description = "```mlir\n" # example # "\n```";
    let arguments = !con((ins Castor_FloatTensor:$input), attributes);
    let results = (outs Castor_FloatTensor:$output);
    let assemblyFormat = "$input attr-dict `:` type($output)";
    let hasVerifier = verifier;
    let extraClassDefinition = [{
      ::llvm::LogicalResult $cppClass::buildVjp(::mlir::OpBuilder &b, ::mlir::ArrayRef<::mlir::Value> dys,
                                                ::llvm::SmallVectorImpl<::mlir::Value> &grads) {
        return ::castor::buildElementwiseVjp<}] # !subst("Castor_", "", NAME) # [{BackwardOp>(*this, b, dys[0], /*savesOutput=*/}] #
        !if(savesOutput, "true", "false") # [{, grads);
      }
    }];
  }
  def BackwardOp : Castor_Op<mnemonic # "_backward", [Pure, Castor_KernelOpInterface,
                                                       AllTypesMatch<["output_grad", "input_grad"]>]> {
    let summary = "gradient of " # mnemonic;
    let description = "dy and the forward's " # !if(savesOutput, "output y", "input x") #
                      " give dx; the attributes are the forward's (runtime/plan/ops.md).";
    let arguments = !con((ins Castor_FloatTensor:$output_grad, Castor_FloatTensor:$saved), attributes);
    let results = (outs Castor_FloatTensor:$input_grad);
    let assemblyFormat = "$output_grad `,` $saved attr-dict `:` functional-type(operands, results)";
  }
}

defm Castor_Relu : Castor_Elementwise<"relu", "max(x, 0)", (ins), /*savesOutput=*/1,
    "%y = castor.relu %x : tensor<1x64x56x56xf32>">;

defm Castor_Sigmoid : Castor_Elementwise<"sigmoid", "1 / (1 + exp(-x))", (ins), /*savesOutput=*/1,
    "%y = castor.sigmoid %x : tensor<1x64xf32>">;

// ReLU6 is clip with min 0 and max 6; either bound may be absent.
defm Castor_Clip : Castor_Elementwise<"clip", "clamps values to [min, max]",
    (ins OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max), /*savesOutput=*/0,
    "%y = castor.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<1x32x112x112xf32>", /*verifier=*/1>;

// ONNX HardSigmoid (alpha 0.2, beta 0.5 by default); PyTorch's hardsigmoid exports alpha 1/6.
defm Castor_HardSigmoid : Castor_Elementwise<"hard_sigmoid", "max(0, min(1, alpha * x + beta))",
    (ins DefaultValuedAttr<F64Attr, "0.2">:$alpha, DefaultValuedAttr<F64Attr, "0.5">:$beta), /*savesOutput=*/0,
    "%y = castor.hard_sigmoid %x {alpha = 0.16666666666666666 : f64, beta = 5.0e-01 : f64} : tensor<1x16x1x1xf32>">;

// As PyTorch's hardswish, computed as x * relu6(x + 3) / 6.
defm Castor_HardSwish : Castor_Elementwise<"hard_swish", "x * max(0, min(1, x / 6 + 1 / 2))", (ins),
    /*savesOutput=*/0, "%y = castor.hard_swish %x : tensor<1x16x112x112xf32>">;

// ONNX Erf; exporters write GELU as x * (1 + erf(x / sqrt(2))) / 2, which castor-fuse-gelu
// rewrites into gelu.
defm Castor_Erf : Castor_Elementwise<"erf", "the error function", (ins), /*savesOutput=*/0,
    "%y = castor.erf %x : tensor<2x197x3072xf32>">;

// x * Phi(x); `tanh` selects PyTorch's tanh approximation,
// x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2.
defm Castor_Gelu : Castor_Elementwise<"gelu", "x * Phi(x), the Gaussian error linear unit", (ins UnitAttr:$tanh),
    /*savesOutput=*/0, "%t = castor.gelu %x {tanh} : tensor<2x197x3072xf32>">;

// ONNX LeakyRelu; PyTorch's leaky_relu (negative_slope 0.01 by default).
defm Castor_LeakyRelu : Castor_Elementwise<"leaky_relu", "x where x >= 0, else alpha * x",
    (ins DefaultValuedAttr<F64Attr, "0.01">:$alpha), /*savesOutput=*/0,
    "%y = castor.leaky_relu %x {alpha = 1.0e-01 : f64} : tensor<1x64x56x56xf32>">;

// ONNX Elu; PyTorch's elu.
defm Castor_Elu : Castor_Elementwise<"elu", "x where x > 0, else alpha * (exp(x) - 1)",
    (ins DefaultValuedAttr<F64Attr, "1.0">:$alpha), /*savesOutput=*/0,
    "%y = castor.elu %x {alpha = 5.0e-01 : f64} : tensor<1x64x56x56xf32>">;

// ONNX Selu (its defaults are PyTorch's constants rounded to f32); PyTorch's selu.
defm Castor_Selu : Castor_Elementwise<"selu", "gamma * x where x > 0, else gamma * alpha * (exp(x) - 1)",
    (ins DefaultValuedAttr<F64Attr, "1.67326319217681884765625">:$alpha,
         DefaultValuedAttr<F64Attr, "1.05070102214813232421875">:$gamma), /*savesOutput=*/0,
    "%y = castor.selu %x : tensor<1x64xf32>">;

// ONNX Celu; PyTorch's celu.
defm Castor_Celu : Castor_Elementwise<"celu", "x where x > 0, else alpha * (exp(x / alpha) - 1)",
    (ins DefaultValuedAttr<F64Attr, "1.0">:$alpha), /*savesOutput=*/0,
    "%y = castor.celu %x {alpha = 2.0 : f64} : tensor<1x64xf32>", /*verifier=*/1>;

// ONNX Softplus; PyTorch's softplus with beta 1.
defm Castor_Softplus : Castor_Elementwise<"softplus", "log(1 + exp(x))", (ins), /*savesOutput=*/0,
    "%y = castor.softplus %x : tensor<1x64xf32>">;

// ONNX Mish; PyTorch's mish.
defm Castor_Mish : Castor_Elementwise<"mish", "x * tanh(log(1 + exp(x)))", (ins), /*savesOutput=*/0,
    "%y = castor.mish %x : tensor<1x64x56x56xf32>">;

// ONNX Softsign; PyTorch's softsign.
defm Castor_Softsign : Castor_Elementwise<"softsign", "x / (1 + |x|)", (ins), /*savesOutput=*/0,
    "%y = castor.softsign %x : tensor<1x64xf32>">;

// ONNX Reciprocal, and the divisor of Div by a computed tensor (imported as a * reciprocal(b)).
defm Castor_Reciprocal : Castor_Elementwise<"reciprocal", "the reciprocal 1 / x", (ins), /*savesOutput=*/1,
    "%y = castor.reciprocal %x : tensor<1x64xf32>">;

// ONNX Sqrt, and the root of ReduceL2 (imported as sqrt(sum(x * x))).
defm Castor_Sqrt : Castor_Elementwise<"sqrt", "the square root", (ins), /*savesOutput=*/1,
    "%y = castor.sqrt %x : tensor<1x64xf32>">;

#endif // CASTOR_ELEMENTWISE_OPS_TD
