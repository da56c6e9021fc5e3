// castor-opt: mlir-opt with the castor dialect and Castor's passes, for pass tests.
#include "castor/Dialect/CastorDialect.h"
#include "castor/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<castor::CastorDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  castor::registerCastorPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "Castor optimizer driver\n", registry));
}
