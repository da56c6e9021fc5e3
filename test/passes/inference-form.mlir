// RUN: castor-opt %s -castor-inference-form | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK-SAME: {castor.name = "images"}
// CHECK-SAME: {castor.name = "output"}
// CHECK-NOT: batch_norm_training
// CHECK: castor.batch_norm_inference %{{.*}}, %[[G:.*]], %[[B:.*]], %[[RM:.*]], %[[RV:.*]] {epsilon = 1.000000e-03 : f64}
// CHECK-NOT: castor.dropout
// CHECK: return
func.func @forward(%x: tensor<2x4xf32> {castor.name = "input"}) -> (tensor<2x4xf32> {castor.name = "logits"}) {
  %g = castor.parameter "g" {trainable} : tensor<4xf32>
  %b = castor.parameter "b" {trainable} : tensor<4xf32>
  %rm = castor.parameter "rm" : tensor<4xf32>
  %rv = castor.parameter "rv" : tensor<4xf32>
  %y, %m, %s = castor.batch_norm_training %x, %g, %b running(%rm, %rv) {epsilon = 1.0e-3 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %d = castor.dropout %y {ratio = 0.3 : f64} : tensor<2x4xf32>
  return %d : tensor<2x4xf32>
}
