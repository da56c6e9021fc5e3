//===- CastorEnums.td - enumerated attributes of the castor dialect -------===//

#ifndef CASTOR_ENUMS_TD
#define CASTOR_ENUMS_TD

include "castor/Dialect/CastorBase.td"
include "mlir/IR/EnumAttr.td"

def Castor_Reduction : I32EnumAttr<"Reduction", "how a loss reduces over the batch", [
    I32EnumAttrCase<"mean", 0>, I32EnumAttrCase<"sum", 1>, I32EnumAttrCase<"none", 2>]> {
  let cppNamespace = "::castor";
  let genSpecializedAttr = 0;
}
def Castor_ReductionAttr : EnumAttr<Castor_Dialect, Castor_Reduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def Castor_Init : I32EnumAttr<"Init", "where a parameter's initial value comes from", [
    // The model file's weights (ONNX initializer data).
    I32EnumAttrCase<"file", 0>,
    // Convolution weights: N(0, 2 / fan_out), as torchvision initialises ResNets.
    I32EnumAttrCase<"kaiming_normal", 1>,
    // Linear weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's nn.Linear default.
    I32EnumAttrCase<"linear_uniform", 2>,
    I32EnumAttrCase<"zeros", 3>,
    I32EnumAttrCase<"ones", 4>,
    // Every element the value of a `castor.init_value` attribute (the loss scale).
    I32EnumAttrCase<"fill", 5>]> {
  let cppNamespace = "::castor";
  let genSpecializedAttr = 0;
}
def Castor_InitAttr : EnumAttr<Castor_Dialect, Castor_Init, "init"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // CASTOR_ENUMS_TD
