// RUN: castor-opt %s -castor-recompute-elementwise | FileCheck %s
// RUN: castor-opt %s -castor-recompute-elementwise -castor-fuse-elementwise | FileCheck %s --check-prefix=FUSED

// SiLU as sigmoid and mul: the backward reads the sigmoid's output and its input x, which it
// keeps anyway; the sigmoid is computed again before its first backward reader, which with the
// other reads the copy. Fused, the forward group writes the product alone and the backward's
// group computes the sigmoid itself: nothing stores it.
// CHECK-LABEL: func.func @silu
// CHECK-SAME: castor.recomputed_in_groups = 1 : i64, castor.recomputed_in_groups_bytes = 512 : i64
// CHECK: %[[S:.*]] = castor.sigmoid %arg0 : tensor<2x8x4x4xf16>
// CHECK: castor.mul %arg0, %[[S]]
// CHECK: castor.softmax_cross_entropy
// CHECK: %[[C:.*]] = castor.sigmoid %arg0 {castor.recomputed} : tensor<2x8x4x4xf16>
// CHECK-NEXT: castor.mul %arg3, %[[C]]
// CHECK: castor.sigmoid_backward %{{.*}}, %[[C]]
// FUSED-LABEL: func.func @silu
// FUSED: castor.fused_elementwise(%arg0) {program = "t0 = sigmoid(i0) : f16\0At1 = mul(i0, t0) : f16\0Aout t1\0A"} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
// FUSED: castor.softmax_cross_entropy
// FUSED: castor.fused_elementwise(%arg0, %arg3) {program = "t0 = sigmoid(i0) : f16
func.func @silu(%x: tensor<2x8x4x4xf16>, %logits: tensor<2x4xf32>, %labels: tensor<2xi64>,
                %dy: tensor<2x8x4x4xf16>) -> (tensor<f32>, tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) {
  %s = castor.sigmoid %x : tensor<2x8x4x4xf16>
  %m = castor.mul %x, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %g1 = castor.mul %dy, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %g2 = castor.mul %dy, %x : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %g3 = castor.sigmoid_backward %g2, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %dx = castor.add %g1, %g3 : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  return %loss, %m, %dx : tensor<f32>, tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>
}

// The sigmoid's operand is a forward value the backward does not read: a copy would keep it
// alive through the backward in the sigmoid's place. Kept as it is.
// CHECK-LABEL: func.func @operand_not_kept
// CHECK-SAME: castor.recomputed_in_groups = 0 : i64, castor.recomputed_in_groups_bytes = 0 : i64}
// CHECK-NOT: {castor.recomputed}
func.func @operand_not_kept(%x: tensor<2x8xf32>, %logits: tensor<2x4xf32>, %labels: tensor<2xi64>,
                            %dy: tensor<2x8xf32>) -> (tensor<f32>, tensor<2x8xf32>) {
  %a = castor.add %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = castor.sigmoid %a : tensor<2x8xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %g = castor.sigmoid_backward %dy, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %loss, %g : tensor<f32>, tensor<2x8xf32>
}

// Squeeze-excitation's gate: its backward reader broadcasts it over a larger domain, whose
// group the copy could not join (it would be a kernel of its own). Kept; so is a value the step
// returns.
// CHECK-LABEL: func.func @reader_of_another_domain
// CHECK-SAME: castor.recomputed_in_groups = 0 : i64, castor.recomputed_in_groups_bytes = 0 : i64}
// CHECK-NOT: {castor.recomputed}
func.func @reader_of_another_domain(%x: tensor<2x8x1x1xf32>, %logits: tensor<2x4xf32>, %labels: tensor<2xi64>,
                                    %dy: tensor<2x8x4x4xf32>) -> (tensor<f32>, tensor<2x8x4x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %s = castor.sigmoid %x : tensor<2x8x1x1xf32>
  %t = castor.sigmoid %logits : tensor<2x4xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %g = castor.mul %dy, %s : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %u = castor.sigmoid_backward %t, %t : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %loss, %g, %t, %u : tensor<f32>, tensor<2x8x4x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// A half-precision copy of a value that the backward reads only before the copy's first backward
// reader: recomputing it there would keep the larger f32 operand alive in its place. Kept. (An
// operand no larger than the value may replace it over that stretch: @silu's x.)
// CHECK-LABEL: func.func @larger_operand_dies_before_the_reader
// CHECK-SAME: castor.recomputed_in_groups = 0 : i64, castor.recomputed_in_groups_bytes = 0 : i64}
// CHECK-NOT: {castor.recomputed}
func.func @larger_operand_dies_before_the_reader(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %logits: tensor<2x4xf32>,
                                                 %labels: tensor<2xi64>, %dy: tensor<2x4x8xf32>)
    -> (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4x8xf16>) {
  %y = castor.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h = castor.cast %y : tensor<2x4x8xf32> to tensor<2x4x8xf16>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %early = castor.mul %dy, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %mm = castor.matmul %early, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %mm16 = castor.cast %mm : tensor<2x4x8xf32> to tensor<2x4x8xf16>
  %g = castor.sigmoid_backward %mm16, %h : (tensor<2x4x8xf16>, tensor<2x4x8xf16>) -> tensor<2x4x8xf16>
  return %loss, %mm, %g : tensor<f32>, tensor<2x4x8xf32>, tensor<2x4x8xf16>
}

// A chain: the backward also reads SiLU's product (squeeze-excitation's gate gradient reads it).
// The product is recomputed too, from the sigmoid's copy: neither is stored.
// CHECK-LABEL: func.func @silu_product
// CHECK-SAME: castor.recomputed_in_groups = 2 : i64, castor.recomputed_in_groups_bytes = 1024 : i64
// CHECK: castor.softmax_cross_entropy
// CHECK: %[[S:.*]] = castor.sigmoid %arg0 {castor.recomputed}
// CHECK-NEXT: %[[M:.*]] = castor.mul %arg0, %[[S]] {castor.recomputed}
// CHECK-NEXT: castor.mul %arg3, %[[M]]
func.func @silu_product(%x: tensor<2x8x4x4xf16>, %logits: tensor<2x4xf32>, %labels: tensor<2xi64>,
                        %dy: tensor<2x8x4x4xf16>) -> (tensor<f32>, tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) {
  %s = castor.sigmoid %x : tensor<2x8x4x4xf16>
  %m = castor.mul %x, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %gm = castor.mul %dy, %m : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %g1 = castor.mul %dy, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %g2 = castor.mul %dy, %x : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %g3 = castor.sigmoid_backward %g2, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %dx = castor.add %g1, %g3 : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  return %loss, %gm, %dx : tensor<f32>, tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>
}
