// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-data-parallel -castor-loss-scale | FileCheck %s
// RUN: castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-data-parallel='bucket-bytes=300' | FileCheck --check-prefix=SMALL %s
// RUN: not castor-opt %s -castor-make-train-step='optimizer=none' -castor-data-parallel 2>&1 | FileCheck --check-prefix=NOOPT %s
// RUN: not castor-opt %s -castor-make-train-step='optimizer=sgd' -castor-data-parallel='sync-batch-norm=true' 2>&1 | FileCheck --check-prefix=NOBN %s

// One bucket (25 MiB by default): a single all_reduce (mean) of every gradient, right after the
// last one is computed (fc1's bias gradient: the backward runs fc2 first), before the loss
// scaler's unscale, which then reads the averaged gradients; the updates apply them. The loss
// is averaged and the correct count summed for the log.
// CHECK-LABEL: func.func @train_step
// CHECK: castor.reduce_sum_to {{.*}} -> tensor<16xf32>
// CHECK-NEXT: %[[R:.*]]:4 = castor.all_reduce {{.*}} {reduction = "mean"} : (tensor<4x16xf32>, tensor<4xf32>, tensor<16x8xf32>, tensor<16xf32>)
// CHECK: castor.unscale_gradients %[[R]]#2, %[[R]]#3, %[[R]]#0, %[[R]]#1 scale
// CHECK: %[[L:.*]] = castor.all_reduce %{{.*}} {reduction = "mean"} : (tensor<f32>) -> tensor<f32>
// CHECK: %[[C:.*]] = castor.all_reduce %{{.*}} {reduction = "sum"} : (tensor<i64>) -> tensor<i64>
// CHECK: return {{.*}}%[[L]], %[[C]]

// Buckets of at most 300 bytes in the order the backward computes the gradients: fc2's weight
// (256 B) and bias (16 B) together; fc1's weight (512 B, larger than the limit) alone, reduced as
// soon as it is computed, while fc1's bias is still to come; then fc1's bias (64 B).
// SMALL-LABEL: func.func @train_step
// SMALL: castor.reduce_sum_to {{.*}} -> tensor<4xf32>
// SMALL-NEXT: castor.all_reduce %{{.*}}, %{{.*}} {reduction = "mean"} : (tensor<4x16xf32>, tensor<4xf32>)
// SMALL: castor.gemm {{.*}} -> tensor<16x8xf32>
// SMALL-NEXT: castor.all_reduce %{{.*}} {reduction = "mean"} : (tensor<16x8xf32>) -> tensor<16x8xf32>
// SMALL-NEXT: castor.reduce_sum_to {{.*}} -> tensor<16xf32>
// SMALL-NEXT: castor.all_reduce %{{.*}} {reduction = "mean"} : (tensor<16xf32>) -> tensor<16xf32>

// NOOPT: data-parallel training needs an optimizer
// NOBN: --sync-batch-norm: the step has no batch norm in training form
func.func @forward(%x: tensor<2x8xf32> {castor.name = "images"}, %labels: tensor<2xi64> {castor.name = "labels"})
    -> (tensor<f32> {castor.name = "loss"}, tensor<2x4xf32> {castor.name = "logits"}) {
  %w1 = castor.parameter "fc1.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<16x8xf32>
  %b1 = castor.parameter "fc1.bias" {init = #castor.init<linear_uniform>, trainable} : tensor<16xf32>
  %h = castor.gemm %x, %w1, %b1 {trans_b = true} : (tensor<2x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %r = castor.relu %h : tensor<2x16xf32>
  %w2 = castor.parameter "fc2.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<4x16xf32>
  %b2 = castor.parameter "fc2.bias" {init = #castor.init<linear_uniform>, trainable} : tensor<4xf32>
  %logits = castor.gemm %r, %w2, %b2 {trans_b = true} : (tensor<2x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<2x4xf32>
}
