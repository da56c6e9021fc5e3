// The inference pipeline of castor compile (--eval), run by castor-opt on a small model.
// RUN: castor-opt %S/Inputs/small-resnet.mlir --castor-inference-pipeline="eval=true precision=bf16" | FileCheck --check-prefix=EVAL %s
// RUN: castor-opt %S/Inputs/small-resnet.mlir --castor-inference-pipeline > %t.forward
// RUN: FileCheck --check-prefix=FORWARD %s < %t.forward
// RUN: FileCheck --check-prefix=FORWARD-KEPT %s < %t.forward
// RUN: not castor-opt %S/Inputs/small-resnet.mlir --castor-inference-pipeline="target=tpu" 2>&1 | FileCheck --check-prefix=TARGET %s

// --eval: the bindings castor-run eval feeds and reads, BatchNorm on its running statistics
// in bf16 with f32 statistics, the classifier one gemm, and the function in plan-level form.
// EVAL-LABEL: func.func @forward
// EVAL-SAME: {castor.name = "images"}) -> (tensor<2x10xbf16> {castor.name = "output"})
// EVAL-SAME: castor.arena_bytes =
// EVAL-SAME: castor.workspace_limit = 0 : i64
// EVAL: castor.conv2d
// EVAL: castor.batch_norm_inference {{.*}}{castor.kernel = "batch_norm_inference"{{.*}} : (tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// EVAL: castor.batch_norm_inference
// EVAL: castor.gemm {{.*}}trans_b = true} : (tensor<2x8xbf16>, tensor<10x8xbf16>, tensor<10xbf16>) -> tensor<2x10xbf16>
// EVAL-NOT: castor.batch_norm_training
// EVAL: return

// Without --eval the forward is compiled as exported: its names, its training-form BatchNorm.
// FORWARD-LABEL: func.func @forward
// FORWARD-SAME: {castor.name = "input"}) -> (tensor<2x10xf32> {castor.name = "output"})
// FORWARD: castor.batch_norm_training {{.*}}{castor.kernel = "batch_norm_training"
// FORWARD-KEPT-NOT: castor.batch_norm_inference
// FORWARD-KEPT-NOT: castor.cast

// TARGET: error: castor-inference-pipeline: --target must be cpu or cuda
