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

#endif // CASTOR_INTERFACES_TD
