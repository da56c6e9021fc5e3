// RUN: castor-opt %s -split-input-file -castor-schedule-casts | FileCheck %s
// RUN: castor-opt %s -split-input-file -castor-schedule-casts="hoist-parameter-casts=false" | FileCheck %s --check-prefix=STAY

// A mixed-precision step: the f16 copies of w1 and w2, which the backward reads again, move to
// the start in their order; w3's copy, which only the forward reads, stays; the f32 copies of
// the gradients move down, in their order, to just before their first reader.
// CHECK-LABEL: func @step
// CHECK-NEXT: %[[H1:.*]] = castor.cast %arg0 : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[H2:.*]] = castor.cast %arg1 : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: castor.mul %arg3, %[[H1]]
// CHECK-NEXT: castor.cast %arg2 : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK: castor.softmax_cross_entropy
// CHECK: %[[G2:.*]] = castor.mul %arg3, %[[H2]]
// CHECK-NEXT: %[[G1:.*]] = castor.mul %arg3, %[[H1]]
// CHECK-NEXT: %[[M:.*]] = castor.mul %[[G1]], %[[G2]]
// CHECK-NEXT: %[[F2:.*]] = castor.cast %[[G2]] : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[F1:.*]] = castor.cast %[[G1]] : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: castor.add %[[F2]], %[[F1]]
// Without hoisting (a step that recomputes) the weights' casts stay; the gradients' still sink.
// STAY-LABEL: func @step
// STAY-NEXT: castor.cast %arg0
// STAY-NEXT: castor.mul
// STAY-NEXT: castor.cast %arg2
// STAY: castor.softmax_cross_entropy
// STAY-NEXT: castor.mul
// STAY-NEXT: castor.mul
// STAY-NEXT: castor.mul
// STAY-NEXT: castor.cast %{{.*}} : tensor<4x4xf16> to tensor<4x4xf32>
// STAY-NEXT: castor.cast %{{.*}} : tensor<4x4xf16> to tensor<4x4xf32>
// STAY-NEXT: castor.add
func.func @step(%w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %w3: tensor<4x4xf32>, %x: tensor<4x4xf16>,
                %logits: tensor<2x4xf32>, %labels: tensor<2xi64>)
    -> (tensor<f32>, tensor<4x4xf16>, tensor<4x4xf16>, tensor<4x4xf32>) {
  %h1 = castor.cast %w1 : tensor<4x4xf32> to tensor<4x4xf16>
  %a = castor.mul %x, %h1 : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  %h3 = castor.cast %w3 : tensor<4x4xf32> to tensor<4x4xf16>
  %b = castor.mul %a, %h3 : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  %h2 = castor.cast %w2 : tensor<4x4xf32> to tensor<4x4xf16>
  %c = castor.mul %b, %h2 : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %g2 = castor.mul %x, %h2 : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  %f2 = castor.cast %g2 : tensor<4x4xf16> to tensor<4x4xf32>
  %g1 = castor.mul %x, %h1 : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  %f1 = castor.cast %g1 : tensor<4x4xf16> to tensor<4x4xf32>
  %m = castor.mul %g1, %g2 : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  %sum = castor.add %f2, %f1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %loss, %c, %m, %sum : tensor<f32>, tensor<4x4xf16>, tensor<4x4xf16>, tensor<4x4xf32>
}

// -----

// Without a loss (an inference function) nothing moves up; a narrowing cast of a computed value
// does not move down, nor does a widening cast already next to its reader.
// CHECK-LABEL: func @forward
// CHECK-NEXT: castor.mul %arg1, %arg1
// CHECK-NEXT: castor.cast %arg0 : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: castor.cast %{{.*}} : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT: castor.cast %{{.*}} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: castor.add
func.func @forward(%w: tensor<4xf32>, %x: tensor<4xf16>) -> (tensor<4xf16>, tensor<4xf32>) {
  %sq = castor.mul %x, %x : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  %h = castor.cast %w : tensor<4xf32> to tensor<4xf16>
  %wide = castor.cast %sq : tensor<4xf16> to tensor<4xf32>
  %narrow = castor.cast %wide : tensor<4xf32> to tensor<4xf16>
  %y = castor.add %h, %narrow : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %y, %wide : tensor<4xf16>, tensor<4xf32>
}
