// RUN: castor-opt %s -castor-recompute="policy=cheap" | FileCheck %s

// A group with a reduction output recomputed for the backward: the copy computes the
// element-wise output only; the reduction's result is never recomputed (the backward reads the
// forward's).
// CHECK-LABEL: func.func @recomputed_group
// CHECK: %[[F:.*]]:2 = castor.fused_elementwise(%arg0) {program = "t0 = sigmoid(i0) : f32\0At1 = mul(i0, t0) : f32\0Aout t1, mean(t1)[2,3]\0A"}
// CHECK: castor.softmax_cross_entropy
// CHECK: %[[C:.*]] = castor.fused_elementwise(%arg0) {castor.recomputed, program = "t0 = sigmoid(i0) : f32\0At1 = mul(i0, t0) : f32\0Aout t1\0A"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK: castor.mul %[[C]], %[[F]]#1
func.func @recomputed_group(%x: tensor<2x8x4x4xf32>, %logits: tensor<2x4xf32>, %labels: tensor<2xi64>,
                            %dy: tensor<2x8x4x4xf32>) -> (tensor<f32>, tensor<2x8x4x4xf32>) {
  %f:2 = castor.fused_elementwise(%x) {program = "t0 = sigmoid(i0) : f32\0At1 = mul(i0, t0) : f32\0Aout t1, mean(t1)[2,3]\0A"} : (tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>)
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %a = castor.mul %f#0, %f#1 : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %b = castor.add %a, %dy : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %loss, %b : tensor<f32>, tensor<2x8x4x4xf32>
}
