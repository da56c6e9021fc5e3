// RUN: castor-opt %s -split-input-file -castor-attach-loss='label-smoothing=0.1' -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32> {castor.name = "images"}, %[[L:.*]]: tensor<4xi64> {castor.name = "labels"})
// CHECK-SAME: -> (tensor<f32> {castor.name = "loss"}, tensor<4x3xf32> {castor.name = "logits"})
// CHECK: %[[Y:.*]] = castor.gemm
// CHECK: %[[LOSS:.*]] = castor.softmax_cross_entropy %[[Y]], %[[L]] {label_smoothing = 1.000000e-01 : f64} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK: return %[[LOSS]], %[[Y]]
func.func @forward(%x: tensor<4x8xf32> {castor.name = "input"}) -> (tensor<4x3xf32> {castor.name = "output"}) {
  %w = castor.parameter "fc.weight" {trainable} : tensor<3x8xf32>
  %y = castor.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// expected-error @+1 {{a loss needs a model with one input and one [N, C] floating-point output}}
func.func @forward(%x: tensor<4x8x2xf32>) -> tensor<4x8x2xf32> {
  return %x : tensor<4x8x2xf32>
}
