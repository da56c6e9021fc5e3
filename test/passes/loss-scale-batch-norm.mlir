// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd momentum=0.9' -castor-loss-scale='mode=guard' | FileCheck %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=adamw' -castor-loss-scale='mode=dynamic' | FileCheck --check-prefix=DYNAMIC %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd micro-batches=2' -castor-loss-scale='mode=guard' | FileCheck --check-prefix=ACCUM %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-loss-scale='mode=none' | FileCheck --check-prefix=NONE %s

// A skipped step is a no-op on the whole state: BatchNorm's running statistics are updated under
// the same on-device flag as the optimizer (found_inf), after it is known, so that a batch whose
// activations or gradients are not finite leaves them as they were.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[RM:[a-z0-9]+]]: tensor<4xf32> {castor.init = #castor.init<zeros>, castor.state = "bn.running_mean"}
// CHECK-SAME: %[[RV:[a-z0-9]+]]: tensor<4xf32> {castor.init = #castor.init<ones>, castor.state = "bn.running_var"}
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[ISTD:.*]] = castor.batch_norm_training
// CHECK: %{{.*}}, %[[INF:.*]] = castor.unscale_gradients
// CHECK: %[[NRM:.*]], %[[NRV:.*]] = castor.batch_norm_running_update %[[RM]], %[[RV]], %[[MEAN]], %[[ISTD]] skip_if %[[INF]] {count = 32 : i64}
// CHECK: castor.sgd_update {{.*}} skip_if %[[INF]]
// CHECK: castor.increment %{{.*}} if %[[INF]] {when = "set"}
// CHECK: return {{.*}}%[[NRM]], %[[NRV]]

// The dynamic loss scaler's overflow skips them too (unlike PyTorch's eager BatchNorm, whose
// forward updates them before GradScaler sees the gradients: docs/reliability.md).
// DYNAMIC-LABEL: func.func @train_step
// DYNAMIC: %{{.*}}, %[[INF:.*]] = castor.unscale_gradients
// DYNAMIC: castor.batch_norm_running_update {{.*}} skip_if %[[INF]]
// DYNAMIC: castor.adamw_update {{.*}} skip_if %[[INF]]
// DYNAMIC: castor.update_loss_scale {{.*}}, %[[INF]]

// Micro-batches: both updates, still chained in their order, wait for the flag.
// ACCUM-LABEL: func.func @train_step
// ACCUM: %{{.*}}, %[[INF:.*]] = castor.unscale_gradients
// ACCUM-NEXT: %[[RM1:.*]], %[[RV1:.*]] = castor.batch_norm_running_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip_if %[[INF]]
// ACCUM-NEXT: castor.batch_norm_running_update %[[RM1]], %[[RV1]], %{{.*}}, %{{.*}} skip_if %[[INF]]

// Without a guard the update is applied whatever the values: no flag.
// NONE-LABEL: func.func @train_step
// NONE: castor.batch_norm_running_update
// NONE-NOT: skip_if
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
