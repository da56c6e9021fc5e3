// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-loss-scale='clip-grad-norm=1.0' -castor-gradient-stats | FileCheck %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=adamw' -castor-loss-scale='mode=static init=128.0' | FileCheck --check-prefix=STATIC %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-loss-scale='mode=none' | FileCheck --check-prefix=NONE %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-loss-scale='mode=guard' | FileCheck --check-prefix=GUARD %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd micro-batches=2' -castor-loss-scale | FileCheck --check-prefix=MICRO %s

// Dynamic scaling: the scale and its growth tracker are state, the scale seeds the backward
// pass, every gradient is unscaled in place (found_inf on any inf/NaN) and clipped, and on
// found_inf the optimizer changes nothing, its step count included.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[SCALE:[a-z0-9]+]]: tensor<f32> {castor.init = #castor.init<fill>, castor.init_value = 6.553600e+04 : f64, castor.state = "castor.loss_scale"}
// CHECK-SAME: %[[TRACKER:[a-z0-9]+]]: tensor<i64> {castor.init = #castor.init<zeros>, castor.state = "castor.loss_scale_growth_tracker"}
// CHECK-SAME: %[[SKIPPED:[a-z0-9]+]]: tensor<i64> {castor.init = #castor.init<zeros>, castor.state = "castor.skipped_steps"}
// CHECK-SAME: -> ({{.*}}tensor<f32> {castor.state = "castor.loss_scale"}, tensor<i64> {castor.state = "castor.loss_scale_growth_tracker"}, tensor<i64> {castor.state = "castor.skipped_steps"}, tensor<f32> {castor.name = "loss"}, tensor<i64> {castor.name = "correct"}, tensor<f32> {castor.name = "lr"}, tensor<i64> {castor.name = "skipped_steps"}, tensor<f32> {castor.name = "loss_scale"}, tensor<i64> {castor.name = "steps_since_overflow"}, tensor<3xf32> {castor.name = "grad_stats:fc.weight"}, tensor<3xf32> {castor.name = "grad_stats:fc.bias"})
// CHECK: castor.softmax_cross_entropy_backward %[[SCALE]], %{{.*}}, %{{.*}}
// CHECK: %[[LR:.*]] = castor.lr_schedule
// CHECK: %[[UNSCALED:.*]]:2, %[[INF:.*]] = castor.unscale_gradients %{{.*}}, %{{.*}} scale %[[SCALE]]
// CHECK: %[[STEP:.*]] = castor.increment %{{.*}} if %[[INF]] : tensor<i64>, tensor<f32>
// CHECK: %[[CLIPPED:.*]]:2, %{{.*}} = castor.clip_grad_norm %[[UNSCALED]]#0, %[[UNSCALED]]#1 {max_norm = 1.000000e+00 : f64}
// CHECK: castor.sgd_update %{{.*}}, %[[CLIPPED]]#0, %{{.*}}, %[[LR]], %[[STEP]] skip_if %[[INF]]
// CHECK: castor.sgd_update %{{.*}}, %[[CLIPPED]]#1, %{{.*}}, %[[LR]], %[[STEP]] skip_if %[[INF]]
// CHECK: %[[SKIPPED2:.*]] = castor.increment %[[SKIPPED]] if %[[INF]] {when = "set"}
// CHECK: %[[NEWSCALE:.*]], %[[NEWTRACKER:.*]] = castor.update_loss_scale %[[SCALE]], %[[TRACKER]], %[[INF]] :
// CHECK: castor.gradient_stats %[[CLIPPED]]#0 : (tensor<4x8xf32>) -> tensor<3xf32>
// CHECK: return
// CHECK-SAME: %[[NEWSCALE]], %[[NEWTRACKER]], %[[SKIPPED2]]

// A static scale is a constant; overflowing steps are still skipped, the scale never changes.
// STATIC-LABEL: func.func @train_step
// STATIC-NOT: castor.loss_scale_growth_tracker
// STATIC: %[[S:.*]] = castor.constant dense<1.280000e+02> : tensor<f32>
// STATIC: castor.softmax_cross_entropy_backward %[[S]]
// STATIC: castor.unscale_gradients {{.*}} scale %[[S]]
// STATIC: castor.adamw_update {{.*}} skip_if
// STATIC-NOT: castor.update_loss_scale

// The guard scales nothing: the seed stays the constant 1 of the backward pass, the gradients are
// checked by an unscale by exactly 1, a non-finite step is skipped and counted.
// GUARD-LABEL: func.func @train_step
// GUARD-SAME: %[[SKIPPED:[a-z0-9]+]]: tensor<i64> {castor.init = #castor.init<zeros>, castor.state = "castor.skipped_steps"}
// GUARD-NOT: castor.loss_scale
// GUARD-SAME: tensor<i64> {castor.name = "skipped_steps"})
// GUARD: %[[ONE:.*]] = castor.constant dense<1.000000e+00> : tensor<f32>
// GUARD-NOT: castor.softmax_cross_entropy_backward %[[ONE]]
// GUARD: castor.unscale_gradients {{.*}} scale %[[ONE]]
// GUARD: castor.sgd_update {{.*}} skip_if
// GUARD: castor.increment %[[SKIPPED]] if %{{.*}} {when = "set"}
// GUARD-NOT: castor.update_loss_scale

// Two micro-batches: each one's seed, 1/2, becomes the scale times 1/2, one product for both.
// MICRO-LABEL: func.func @train_step
// MICRO-SAME: %[[SCALE:[a-z0-9]+]]: tensor<f32> {castor.init = #castor.init<fill>, castor.init_value = 6.553600e+04 : f64, castor.state = "castor.loss_scale"}
// MICRO: %[[HALF:.*]] = castor.constant dense<5.000000e-01> : tensor<f32>
// MICRO: %[[SEED:.*]] = castor.mul %[[SCALE]], %[[HALF]]
// MICRO: castor.softmax_cross_entropy_backward %[[SEED]]
// MICRO: castor.softmax_cross_entropy_backward %[[SEED]]
// MICRO: castor.unscale_gradients {{.*}} scale %[[SCALE]]

// NONE-NOT: unscale_gradients
// NONE-NOT: skip_if
func.func @forward(%x: tensor<2x8xf32> {castor.name = "images"}, %labels: tensor<2xi64> {castor.name = "labels"})
    -> (tensor<f32> {castor.name = "loss"}, tensor<2x4xf32> {castor.name = "logits"}) {
  %w = castor.parameter "fc.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<4x8xf32>
  %b = castor.parameter "fc.bias" {init = #castor.init<linear_uniform>, trainable} : tensor<4xf32>
  %logits = castor.gemm %x, %w, %b {trans_b = true} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<2x4xf32>
}
