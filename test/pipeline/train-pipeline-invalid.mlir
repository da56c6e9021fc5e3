// The training pipeline refuses options as castor compile does, before any pass runs.
// RUN: not castor-opt %s --castor-train-pipeline="precision=fp8" 2>&1 | FileCheck --check-prefix=PRECISION %s
// RUN: not castor-opt %s --castor-train-pipeline="fuse=maybe" 2>&1 | FileCheck --check-prefix=FUSE %s
// RUN: not castor-opt %s --castor-train-pipeline="loss-scale=static:big" 2>&1 | FileCheck --check-prefix=STATIC %s
// RUN: not castor-opt %s --castor-train-pipeline="loss-scale=wild" 2>&1 | FileCheck --check-prefix=SCALE %s
// RUN: not castor-opt %s --castor-train-pipeline="sync-batch-norm=true" 2>&1 | FileCheck --check-prefix=SYNC %s
// RUN: not castor-opt %s --castor-train-pipeline="recompute=auto" 2>&1 | FileCheck --check-prefix=BUDGET %s
// RUN: not castor-opt %s --castor-train-pipeline="workspace-limit=lots" 2>&1 | FileCheck --check-prefix=WORKSPACE %s
// RUN: not castor-opt %s --castor-inference-pipeline="batch-norm=train" 2>&1 | FileCheck --check-prefix=UNKNOWN %s

// PRECISION: error: castor-train-pipeline: --precision must be fp32, fp16 or bf16
// FUSE: error: castor-train-pipeline: --fuse must be auto, patterns or none
// STATIC: error: castor-train-pipeline: --loss-scale static:S needs a number S
// SCALE: error: castor-train-pipeline: loss-scale mode must be dynamic, static, guard or none, got 'wild'
// SYNC: error: castor-train-pipeline: --sync-batch-norm needs --data-parallel
// BUDGET: error: castor-train-pipeline: recompute policy auto needs a memory budget such as 6GiB, got ''
// WORKSPACE: error: castor-train-pipeline: --workspace-limit must be auto or a size such as 512MiB, got 'lots'
// The inference pipeline has no training options.
// UNKNOWN: no such option batch-norm
// The pipeline never ran: nothing was printed.
// PRECISION-NOT: module
// STATIC-NOT: module

module attributes {castor.batch = 2 : i64} {
  func.func @forward(%x: tensor<2x4xf32> {castor.name = "input"}) -> (tensor<2x3xf32> {castor.name = "output"}) {
    %w = castor.parameter "fc.weight" {trainable} : tensor<3x4xf32>
    %y = castor.gemm %x, %w {trans_b = true} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}
