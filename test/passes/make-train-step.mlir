// RUN: castor-opt %s -split-input-file -castor-make-train-step='optimizer=sgd lr=0.05 momentum=0.9 weight-decay=1e-4 no-decay-bn-bias=true' -verify-diagnostics | FileCheck %s
// RUN: castor-opt %s -split-input-file -castor-make-train-step='optimizer=adamw lr=0.001 schedule=cosine warmup-steps=5 total-steps=100' -verify-diagnostics 2>/dev/null | FileCheck --check-prefix=ADAMW %s
// RUN: castor-opt %s -split-input-file -castor-make-train-step='micro-batches=2' -verify-diagnostics 2>/dev/null | FileCheck --check-prefix=ACCUM %s

// A conv-BN-ReLU block with a residual add, max pooling and a classifier.

// The signature: state (parameters, BN buffers, optimizer buffers, counters), then the batch.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4x4x3x3xf32> {castor.init = #castor.init<kaiming_normal>, castor.state = "conv.weight", castor.trainable}
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<4xf32> {castor.init = #castor.init<ones>, castor.state = "bn.weight", castor.trainable}
// CHECK-SAME: %[[RM:[a-z0-9]+]]: tensor<4xf32> {castor.init = #castor.init<zeros>, castor.state = "bn.running_mean"}
// CHECK-SAME: %[[FC:[a-z0-9]+]]: tensor<10x16xf32> {castor.init = #castor.init<linear_uniform>, castor.state = "fc.weight", castor.trainable}
// CHECK-SAME: {castor.init = #castor.init<zeros>, castor.state = "conv.weight.momentum_buffer"}
// CHECK-SAME: %[[IT:[a-z0-9]+]]: tensor<i64> {castor.init = #castor.init<zeros>, castor.state = "castor.iteration"}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {castor.init = #castor.init<zeros>, castor.state = "castor.optimizer_step"}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x4x4xf32> {castor.name = "images"}, %[[L:[a-z0-9]+]]: tensor<2xi64> {castor.name = "labels"}
// CHECK-SAME: -> (tensor<4x4x3x3xf32> {castor.state = "conv.weight"}
// CHECK-SAME: tensor<f32> {castor.name = "loss"}, tensor<i64> {castor.name = "correct"}, tensor<f32> {castor.name = "lr"})

// Forward, with the parameters replaced by state.
// CHECK: %[[C:.*]] = castor.conv2d %[[X]], %[[W]]
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[ISTD:.*]] = castor.batch_norm_training %[[C]], %[[G]], %{{.*}} running(%[[RM]], %{{.*}})
// CHECK: %[[R:.*]] = castor.relu %[[Y]]
// CHECK: %[[S:.*]] = castor.add %[[R]], %[[X]]
// CHECK: %[[P:.*]] = castor.max_pool2d %[[S]]
// CHECK: %[[F:.*]] = castor.flatten %[[P]]
// CHECK: %[[LOGITS:.*]] = castor.gemm %[[F]], %[[FC]]
// CHECK: %[[LOSS:.*]] = castor.softmax_cross_entropy %[[LOGITS]], %[[L]]

// Backward in reverse order, seeded with d(loss) = 1.
// CHECK: %[[ONE:.*]] = castor.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = castor.softmax_cross_entropy_backward %[[ONE]], %[[LOGITS]], %[[L]]
// CHECK: %[[DF:.*]] = castor.gemm %[[DLOGITS]], %[[FC]] :
// CHECK: %[[DFC:.*]] = castor.gemm %[[DLOGITS]], %[[F]] {trans_a = true}
// CHECK: %[[DP:.*]] = castor.reshape %[[DF]]
// CHECK: %[[DS:.*]] = castor.max_pool2d_backward %[[DP]], %[[S]]
// CHECK: %[[DR:.*]] = castor.relu_backward %[[DS]], %[[R]]
// CHECK: %[[DC:.*]], %[[DG:.*]], %[[DB:.*]] = castor.batch_norm_training_backward %[[DR]], %[[C]], %[[G]], %[[MEAN]], %[[ISTD]]
// CHECK: %[[DW:.*]] = castor.conv2d_backward_filter %[[X]], %[[DC]]

// BN running statistics, then the optimizer: weight decay on weights, not on BN parameters.
// CHECK: castor.batch_norm_running_update %[[RM]], %{{.*}}, %[[MEAN]], %[[ISTD]] {count = 32 : i64}
// CHECK: %[[LR:.*]] = castor.lr_schedule %[[IT]] {base_lr = 5.000000e-02 : f64} : (tensor<i64>) -> tensor<f32>
// CHECK-NEXT: %[[LR_OUT:.*]] = castor.identity %[[LR]] : tensor<f32>
// CHECK: %[[STEP2:.*]] = castor.increment %[[STEP]]
// CHECK: castor.sgd_update %[[W]], %[[DW]], %{{.*}}, %[[LR]], %[[STEP2]] {momentum = 9.000000e-01 : f64, weight_decay = 1.000000e-04 : f64}
// CHECK: castor.sgd_update %[[G]], %[[DG]], %{{.*}}, %[[LR]], %[[STEP2]] {momentum = 9.000000e-01 : f64}
// CHECK: castor.sgd_update %[[FC]], %[[DFC]], %{{.*}}, %[[LR]], %[[STEP2]] {momentum = 9.000000e-01 : f64, weight_decay = 1.000000e-04 : f64}
// The iteration counter advances after every reader of this step's value.
// CHECK: %[[IT2:.*]] = castor.increment %[[IT]]
// CHECK: %[[CORRECT:.*]] = castor.count_correct %[[LOGITS]], %[[L]]
// CHECK: return {{.*}}%[[IT2]], %[[STEP2]], %[[LOSS]], %[[CORRECT]]

// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME: castor.state = "conv.weight.exp_avg"
// ADAMW-SAME: castor.state = "conv.weight.exp_avg_sq"
// ADAMW: castor.lr_schedule %{{.*}} {base_lr = 1.000000e-03 : f64, kind = "cosine", total_steps = 100 : i64, warmup_steps = 5 : i64}
// ADAMW-COUNT-4: castor.adamw_update
// Two micro-batches: the step takes twice the batch, runs forward and backward per slice with
// the loss gradient seeded at 1/2, sums the gradients, and updates the running statistics twice.
// ACCUM-LABEL: func.func @train_step
// ACCUM-SAME: %[[X:[a-z0-9]+]]: tensor<4x4x4x4xf32> {castor.name = "images"}, %[[L:[a-z0-9]+]]: tensor<4xi64> {castor.name = "labels"}
// ACCUM: %[[XS:.*]]:2 = castor.split %[[X]] {axis = 0 : i64} : (tensor<4x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>)
// ACCUM: %[[LS:.*]]:2 = castor.split %[[L]] {axis = 0 : i64}
// ACCUM: castor.conv2d %[[XS]]#0
// ACCUM: %[[LOSS0:.*]] = castor.softmax_cross_entropy %{{.*}}, %[[LS]]#0
// ACCUM: castor.conv2d %[[XS]]#1
// ACCUM: %[[LOSS1:.*]] = castor.softmax_cross_entropy %{{.*}}, %[[LS]]#1
// ACCUM: %[[HALF:.*]] = castor.constant dense<5.000000e-01> : tensor<f32>
// ACCUM: castor.softmax_cross_entropy_backward %[[HALF]]
// ACCUM: %[[DW1:.*]] = castor.conv2d_backward_filter %[[XS]]#1
// ACCUM: castor.softmax_cross_entropy_backward %[[HALF]]
// ACCUM: %[[DW0:.*]] = castor.conv2d_backward_filter %[[XS]]#0
// ACCUM: %[[DW:.*]] = castor.add %[[DW1]], %[[DW0]]
// ACCUM: %[[SUM:.*]] = castor.add %[[LOSS0]], %[[LOSS1]]
// ACCUM: castor.mul %[[SUM]], %{{.*}}
// ACCUM: %[[RM1:.*]], %[[RV1:.*]] = castor.batch_norm_running_update %{{.*}}, %{{.*}} {count = 32 : i64}
// ACCUM: castor.batch_norm_running_update %[[RM1]], %[[RV1]]
// ACCUM: castor.sgd_update %{{.*}}, %[[DW]]
func.func @forward(%x: tensor<2x4x4x4xf32> {castor.name = "images"}, %labels: tensor<2xi64> {castor.name = "labels"})
    -> (tensor<f32> {castor.name = "loss"}, tensor<2x10xf32> {castor.name = "logits"}) {
  %w = castor.parameter "conv.weight" {init = #castor.init<kaiming_normal>, trainable} : tensor<4x4x3x3xf32>
  %g = castor.parameter "bn.weight" {init = #castor.init<ones>, trainable} : tensor<4xf32>
  %b = castor.parameter "bn.bias" {init = #castor.init<zeros>, trainable} : tensor<4xf32>
  %rm = castor.parameter "bn.running_mean" {init = #castor.init<zeros>} : tensor<4xf32>
  %rv = castor.parameter "bn.running_var" {init = #castor.init<ones>} : tensor<4xf32>
  %fc = castor.parameter "fc.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<10x16xf32>
  %c = castor.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x4x4xf32>
  %y, %m, %s = castor.batch_norm_training %c, %g, %b running(%rm, %rv) : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.relu %y : tensor<2x4x4x4xf32>
  %sum = castor.add %r, %x : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = castor.max_pool2d %sum {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  %f = castor.flatten %p : (tensor<2x4x2x2xf32>) -> tensor<2x16xf32>
  %logits = castor.gemm %f, %fc {trans_b = true} : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<2x10xf32>
}

// -----

// A loss computed from a layer norm's statistics (ONNX's Mean output) cannot be differentiated:
// the layer norm says so instead of dropping that gradient.
func.func @forward(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>) {
  %g = castor.parameter "g" {trainable} : tensor<4xf32>
  // expected-error @+1 {{'castor.layer_norm' op differentiating through the layer statistics is not supported}}
  %y, %mean, %inv_std = castor.layer_norm %x, %g, %g {epsilon = 1.0e-05 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %shifted = castor.add %y, %mean : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %loss = castor.softmax_cross_entropy %shifted, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %y : tensor<f32>, tensor<2x4xf32>
}

// -----

// An op on the path to the loss without a VJP is an error that names it.
func.func @forward(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>) {
  %mean = castor.parameter "m" : tensor<4xf32>
  %g = castor.parameter "g" {trainable} : tensor<4xf32>
  // expected-error @+1 {{'castor.batch_norm_apply' has no VJP, so the loss cannot be differentiated through it}}
  %y = castor.batch_norm_apply %x, %g, %g, %mean, %mean : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = castor.softmax_cross_entropy %y, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %y : tensor<f32>, tensor<2x4xf32>
}
