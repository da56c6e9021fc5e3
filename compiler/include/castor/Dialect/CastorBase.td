//===- CastorBase.td - the castor dialect and its type constraints --------===//
//
// The graph-level dialect of Castor: value semantics on statically shaped, ranked tensors.
//
//===----------------------------------------------------------------------===//

#ifndef CASTOR_BASE_TD
#define CASTOR_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Castor_Dialect : Dialect {
  let name = "castor";
  let cppNamespace = "::castor";
  let summary = "Castor's graph dialect for compiling training steps";
  let description = [{
    Ops of neural-network graphs as Castor imports them from ONNX: forward computation first,
    then the loss, backward and optimizer ops that the training-step passes append. All tensors
    are ranked and statically shaped (the batch size is fixed at compile time). Element types
    are f32, f16, bf16 and f64 (the latter for gradient checks on the CPU reference) for data,
    and i64 for labels and indices.
  }];
  let usePropertiesForAttributes = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let extraClassDeclaration = [{
    // Each op file registers its own ops, so no translation unit holds them all.
    void registerNNOps();
    void registerTensorOps();
    void registerElementwiseOps();
    void registerBackwardOps();
    void registerOptimizerOps();
    void registerFusedOps();
  }];
}

// Element types that carry activations, weights and gradients.
def Castor_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def Castor_AnyElement : AnyTypeOf<[F16, BF16, F32, F64, I64]>;

def Castor_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def Castor_IndexTensor : StaticShapeTensorOf<[I64]>;
def Castor_AnyTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I64]>;

class Castor_Op<string mnemonic, list<Trait> traits = []>
    : Op<Castor_Dialect, mnemonic, traits>;

#endif // CASTOR_BASE_TD
