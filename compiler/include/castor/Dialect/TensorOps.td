//===- TensorOps.td - castor elementwise, data-movement and source ops ----===//

#ifndef CASTOR_TENSOR_OPS_TD
#define CASTOR_TENSOR_OPS_TD

include "castor/Dialect/CastorEnums.td"
include "castor/Dialect/CastorInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Castor_ParameterOp : Castor_Op<"parameter", [Pure]> {
  let summary = "a named model parameter or buffer";
  let description = [{
    A weight (`trainable`) or a buffer such as a BatchNorm running statistic. The name is the
    one of the model file (`layer1.0.conv1.weight`), so weights can be matched with other
    frameworks' checkpoints. Values never appear in the IR: `init` says where they come from
    (the model file's data, or a seeded initialiser).

    ```mlir
    %w = castor.parameter "conv1.weight" {init = #castor.init<kaiming_normal>, trainable}
        : tensor<64x3x7x7xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name,
                       DefaultValuedAttr<Castor_InitAttr, "::castor::Init::file">:$init,
                       UnitAttr:$trainable);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$name attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def Castor_ConstantOp : Castor_Op<"constant", [Pure, ConstantLike, AllTypesMatch<["value", "output"]>]> {
  let summary = "a small constant tensor";
  let description = [{
    For small values that are part of the graph's definition (not model weights).

    ```mlir
    %c = castor.constant dense<1.0> : tensor<4xf32>
    ```
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Castor_IdentityOp : Castor_Op<"identity", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, SameOperandsAndResultType]> {
  let summary = "returns its operand";
  let description = [{
    ```mlir
    %y = castor.identity %x : tensor<4xf32>
    ```
  }];
  let arguments = (ins Castor_AnyTensor:$input);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasFolder = 1;
}

def Castor_CastOp : Castor_Op<"cast", [Pure, Castor_KernelOpInterface, Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, SameOperandsAndResultShape]> {
  let summary = "element type conversion";
  let description = [{
    Float to float rounds to nearest even; float to i64 truncates toward zero. Casting to the
    same type is allowed (and folds away); a narrowing pair such as f32 -> f16 -> f32 is not
    the identity and is never folded.

    ```mlir
    %h = castor.cast %x : tensor<8x64xf32> to tensor<8x64xf16>
    ```
  }];
  let arguments = (ins Castor_AnyTensor:$input);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasFolder = 1;
}

class Castor_BinaryElementwiseOp<string mnemonic, string summaryText>
    : Castor_Op<mnemonic, [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = summaryText;
  let arguments = (ins Castor_FloatTensor:$lhs, Castor_FloatTensor:$rhs);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def Castor_AddOp : Castor_BinaryElementwiseOp<"add", "elementwise sum with broadcasting"> {
  let description = [{
    Operands share an element type; shapes broadcast as in NumPy.

    ```mlir
    %y = castor.add %a, %b : (tensor<1x256x56x56xf32>, tensor<1x256x56x56xf32>) -> tensor<1x256x56x56xf32>
    ```
  }];
}

def Castor_MulOp : Castor_BinaryElementwiseOp<"mul", "elementwise product with broadcasting"> {
  let description = [{
    Operands share an element type; shapes broadcast as in NumPy.

    ```mlir
    %y = castor.mul %a, %s : (tensor<1x64x8x8xf32>, tensor<1x64x1x1xf32>) -> tensor<1x64x8x8xf32>
    ```
  }];
}

def Castor_FlattenOp : Castor_Op<"flatten", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "collapses dimensions before and from `axis` into two";
  let description = [{
    ```mlir
    %y = castor.flatten %x {axis = 1 : i64} : (tensor<1x2048x1x1xf32>) -> tensor<1x2048xf32>
    ```
  }];
  let arguments = (ins Castor_AnyTensor:$input, DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Castor_ReshapeOp : Castor_Op<"reshape", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>]> {
  let summary = "reinterprets the elements in a new static shape";
  let description = [{
    The result type gives the new shape; the element count and type must be unchanged.

    ```mlir
    %y = castor.reshape %x : tensor<1x2048x1x1xf32> to tensor<1x2048xf32>
    ```
  }];
  let arguments = (ins Castor_AnyTensor:$input);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasVerifier = 1;
}

def Castor_TransposeOp : Castor_Op<"transpose", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "permutes the dimensions";
  let description = [{
    As ONNX Transpose: result dimension i is input dimension `perm[i]`.

    ```mlir
    %y = castor.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x96x56x56xf32>) -> tensor<2x56x56x96xf32>
    ```
  }];
  let arguments = (ins Castor_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Castor_SliceOp : Castor_Op<"slice", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, Castor_RecomputeOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "a strided window of the input";
  let description = [{
    ONNX Slice with one start, end and step per dimension (the importer fills the dimensions
    ONNX leaves out); negative starts and ends count from the end and are clamped, as in ONNX.

    ```mlir
    %y = castor.slice %x {starts = array<i64: 0, 58, 0, 0>, ends = array<i64: 2, 116, 28, 28>, steps = array<i64: 1, 1, 1, 1>}
        : (tensor<2x116x28x28xf32>) -> tensor<2x58x28x28xf32>
    ```
  }];
  let arguments = (ins Castor_AnyTensor:$input, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$ends,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Castor_ConcatOp : Castor_Op<"concat", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, InferTypeOpAdaptor]> {
  let summary = "concatenation along one axis";
  let description = [{
    ```mlir
    %y = castor.concat %a, %b {axis = 1 : i64}
        : (tensor<1x64x8x8xf32>, tensor<1x32x8x8xf32>) -> tensor<1x96x8x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Castor_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Castor_AnyTensor:$output);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def Castor_DropoutOp : Castor_Op<"dropout", [Pure, Castor_KernelOpInterface, Castor_PrecisionOpInterface, DeclareOpInterfaceMethods<Castor_AutodiffOpInterface>, AllTypesMatch<["input", "output"]>]> {
  let summary = "inverted dropout in training, identity otherwise";
  let description = [{
    With an `iteration` operand (the training step's counter) each element is zeroed with
    probability `ratio` and the others are scaled by 1 / (1 - ratio); the mask comes from a
    counter-based generator keyed by `seed`, `salt` (one per dropout op), iteration and
    element, so every backend draws the same one. Without it (inference) it is the identity.
    With `per_sample` one draw per sample (index along the first dimension) zeroes or scales
    the whole sample: stochastic depth (drop path), as torchvision's StochasticDepth "row" mode.

    ```mlir
    %y = castor.dropout %x [%it : tensor<i64>] {ratio = 2.0e-01 : f64, salt = 1 : i64} : tensor<8x4096xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$input, Optional<Castor_IndexTensor>:$iteration,
                       DefaultValuedAttr<F64Attr, "0.5">:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       DefaultValuedAttr<I64Attr, "0">:$salt,
                       UnitAttr:$per_sample);
  let results = (outs Castor_FloatTensor:$output);
  let assemblyFormat = "$input (`[` $iteration^ `:` type($iteration) `]`)? attr-dict `:` type($output)";
  let hasVerifier = 1;
}

#endif // CASTOR_TENSOR_OPS_TD
