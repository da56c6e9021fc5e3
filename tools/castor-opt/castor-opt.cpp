// castor-opt: mlir-opt with the castor dialect, Castor's passes (the graph-level ones and the
// lowering to plan-level form) and the compile pipelines (castor-train-pipeline,
// castor-inference-pipeline), for pass and pipeline tests.
#include "castor/Dialect/CastorDialect.h"
#include "castor/Passes/Passes.h"
#include "castor/Pipeline/Pipeline.h"
#include "castor/Plan/PlanPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<castor::CastorDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  castor::registerCastorPasses();
  castor::registerCastorPlanPasses();
  castor::registerCastorPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "Castor optimizer driver\n", registry));
}
