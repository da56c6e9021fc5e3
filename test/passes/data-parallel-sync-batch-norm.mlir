// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-data-parallel='sync-batch-norm=true' | FileCheck %s
// RUN: castor-opt %s -castor-autocast='precision=fp16' -castor-make-train-step='optimizer=sgd' -castor-data-parallel='sync-batch-norm=true' -castor-fuse-batch-norm-relu | FileCheck --check-prefix=FUSED %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-data-parallel | FileCheck --check-prefix=PER-REPLICA %s
// RUN: castor-opt %s -castor-autocast='precision=fp16' -castor-make-train-step='optimizer=sgd' -castor-data-parallel -castor-fuse-batch-norm-relu | FileCheck --check-prefix=PER-REPLICA %s

// castor-data-parallel with sync-batch-norm: the batch norm, its backward and its running
// statistics' update take the statistics of every replica's batch (`sync`), and so does the
// fused batch-norm-ReLU that castor-fuse-batch-norm-relu makes of them (in fp16).
// CHECK-LABEL: func.func @train_step
// CHECK: castor.batch_norm_training {{.*}}sync
// CHECK: castor.batch_norm_training_backward {{.*}}sync
// CHECK: castor.batch_norm_running_update {{.*}}sync
// FUSED-LABEL: func.func @train_step
// FUSED: castor.batch_norm_relu_training {{.*}}sync
// FUSED: castor.batch_norm_relu_training_backward {{.*}}sync
// FUSED: castor.batch_norm_running_update {{.*}}sync
// Without it, per-replica statistics (DistributedDataParallel's default).
// PER-REPLICA-LABEL: func.func @train_step
// PER-REPLICA-NOT: sync
func.func @forward(%x: tensor<2x4x4x4xf32> {castor.name = "images"}, %labels: tensor<2xi64> {castor.name = "labels"})
    -> (tensor<f32> {castor.name = "loss"}, tensor<2x10xf32> {castor.name = "logits"}) {
  %w = castor.parameter "conv.weight" {init = #castor.init<kaiming_normal>, trainable} : tensor<4x4x3x3xf32>
  %g = castor.parameter "bn.weight" {init = #castor.init<ones>, trainable} : tensor<4xf32>
  %b = castor.parameter "bn.bias" {init = #castor.init<zeros>, trainable} : tensor<4xf32>
  %rm = castor.parameter "bn.running_mean" {init = #castor.init<zeros>} : tensor<4xf32>
  %rv = castor.parameter "bn.running_var" {init = #castor.init<ones>} : tensor<4xf32>
  %fc = castor.parameter "fc.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<10x64xf32>
  %c = castor.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x4x4xf32>
  %y, %m, %s = castor.batch_norm_training %c, %g, %b running(%rm, %rv) : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.relu %y : tensor<2x4x4x4xf32>
  %f = castor.flatten %r : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  %logits = castor.gemm %f, %fc {trans_b = true} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<2x10xf32>
}
