//===- CastorInterfaces.td - op interfaces of the castor dialect ----------===//

#ifndef CASTOR_INTERFACES_TD
#define CASTOR_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Castor_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::castor";
  let description = [{
    An op that executes as one kernel of a plan. Ops without it (parameters, constants) are
    sources whose values the runtime places in the arena before the step.
  }];
  let methods = [
    InterfaceMethod<[{
        The runtime kernel that computes this op on the given target ("cpu" or "cuda").
        By default the op's name without the dialect prefix.
      }],
      "::std::string", "getKernelName", (ins "::llvm::StringRef":$target), [{}], [{
        return $_op->getName().stripDialect().str();
      }]>,
  ];
}

def Castor_AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let cppNamespace = "::castor";
  let description = [{
    An op that knows its vector-Jacobian product. Reverse-mode autodiff (the
    make-train-step pass) calls `buildVjp` with the gradients of the op's results (null for a
    result nothing downstream differentiates) and receives the gradients of its operands
    (null for an operand without one, such as integer labels). The builder's insertion point
    is where the backward ops go.
  }];
  let methods = [
    InterfaceMethod<"Builds the operand gradients from the result gradients.",
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

def Castor_InPlaceOpInterface : OpInterface<"InPlaceOpInterface"> {
  let cppNamespace = "::castor";
  let description = [{
    An op whose results replace some of its operands (optimizer updates, counters, running
    statistics): the plan writes such a result into its operand's buffer.
  }];
  let methods = [
    InterfaceMethod<"The operand whose buffer result `resultIndex` reuses, if any.",
      "std::optional<unsigned>", "getTiedOperandIndex", (ins "unsigned":$resultIndex)>,
  ];
}

def Castor_PrecisionOpInterface : OpInterface<"PrecisionOpInterface"> {
  let cppNamespace = "::castor";
  let description = [{
    How an op fares in low precision, for the autocast pass: compute-bound ops (convolution,
    matrix products) run in fp16/bf16 on tensor cores; numerically sensitive ones (softmax,
    the loss, reductions) in fp32; BatchNorm is mixed (its data, operand 0, stays in the
    precision it arrives in, its parameters and statistics in fp32, its arithmetic in fp32
    inside the kernel); the rest follow their inputs.
  }];
  let methods = [
    InterfaceMethod<"The op's precision class.", "::castor::PrecisionClass", "getPrecisionClass", (ins), [{}], [{
        return ::castor::PrecisionClass::Neutral;
      }]>,
  ];
}

def Castor_RecomputeOpInterface : OpInterface<"RecomputeOpInterface"> {
  let cppNamespace = "::castor";
  let description = [{
    An op that can run again in the backward instead of keeping its result alive from the
    forward: cheaply (memory-bound element-wise work: activations, casts, the residual add, the
    batch-norm apply) or at a real cost (a convolution). The recompute pass (castor-recompute) asks it for a copy of one result
    computed from given operands, inserted at the builder's insertion point, and for the
    arithmetic that copy adds. Recomputing gives the same bits as the original (plan/ops.md).
  }];
  let methods = [
    InterfaceMethod<[{
        Builds result `resultIndex` again from `operands` (the op's operands, or their own
        recomputed copies); a null value when that result cannot be recomputed alone (a
        batch norm's statistics). By default a clone of the op.
      }],
      "::mlir::Value", "buildRecompute",
      (ins "::mlir::OpBuilder &":$builder, "unsigned":$resultIndex, "::mlir::ValueRange":$operands), [{}], [{
        ::mlir::IRMapping map;
        map.map($_op->getOperands(), operands);
        return builder.clone(*$_op.getOperation(), map)->getResult(resultIndex);
      }]>,
    InterfaceMethod<[{
        Floating-point operations per element of the result that recomputing it costs.
      }],
      "int64_t", "getRecomputeFlopsPerElement", (ins), [{}], [{ return 1; }]>,
    InterfaceMethod<[{
        Whether recomputing is cheap (memory-bound work: the `cheap` policy takes every such
        value); compute-bound ops (convolutions) are recomputed only by the `auto` policy,
        after every cheap value, when the budget needs it.
      }],
      "bool", "isCheapToRecompute", (ins), [{}], [{ return true; }]>,
  ];
}

#endif // CASTOR_INTERFACES_TD
