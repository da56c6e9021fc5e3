// RUN: castor-opt %s -split-input-file -castor-fuse-gradient-add | FileCheck %s

// A residual block's input: the skip connection's gradient %g, computed before the
// convolution's data gradient, becomes its accumulate operand, at the convolution's place.
// CHECK-LABEL: func.func @residual
// CHECK: %[[G:.*]] = castor.relu_backward
// CHECK: %[[S:.*]] = castor.conv2d_backward_data %arg1, %arg2 accumulate(%[[G]]) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x6x6xf16>, tensor<8x4x3x3xf16>, tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf16>
// CHECK-NOT: castor.add
// CHECK: return %[[S]]
func.func @residual(%dy0: tensor<2x4x6x6xf16>, %dy: tensor<2x8x6x6xf16>, %w: tensor<8x4x3x3xf16>, %y: tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf16> {
  %g = castor.relu_backward %dy0, %y : (tensor<2x4x6x6xf16>, tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf16>
  %d = castor.conv2d_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x6x6xf16>, tensor<8x4x3x3xf16>) -> tensor<2x4x6x6xf16>
  %s = castor.add %d, %g : (tensor<2x4x6x6xf16>, tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf16>
  return %s : tensor<2x4x6x6xf16>
}

// -----

// A gradient computed after the convolution's: the fused op takes the add's place.
// CHECK-LABEL: func.func @later_other
// CHECK: castor.relu_backward
// CHECK: %[[G:.*]] = castor.relu_backward
// CHECK-NEXT: %[[S:.*]] = castor.conv2d_backward_data %arg1, %arg2 accumulate(%[[G]])
// CHECK-NOT: castor.add
func.func @later_other(%dy0: tensor<2x4x6x6xf32>, %dy: tensor<2x8x6x6xf32>, %w: tensor<8x4x3x3xf32>, %y: tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32> {
  %d = castor.conv2d_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x6x6xf32>, tensor<8x4x3x3xf32>) -> tensor<2x4x6x6xf32>
  %a = castor.relu_backward %dy0, %y : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %g = castor.relu_backward %a, %y : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %s = castor.add %g, %d : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  return %s : tensor<2x4x6x6xf32>
}

// -----

// Two data gradients (a block with a projection shortcut): the later takes the earlier.
// CHECK-LABEL: func.func @two_convolutions
// CHECK: %[[D1:.*]] = castor.conv2d_backward_data %arg0, %arg1 :
// CHECK-NEXT: %[[S:.*]] = castor.conv2d_backward_data %arg2, %arg3 accumulate(%[[D1]])
// CHECK-NOT: castor.add
// CHECK: return %[[S]]
func.func @two_convolutions(%dy1: tensor<2x8x6x6xf16>, %w1: tensor<8x4x1x1xf16>, %dy2: tensor<2x8x6x6xf16>, %w2: tensor<8x4x1x1xf16>) -> tensor<2x4x6x6xf16> {
  %d1 = castor.conv2d_backward_data %dy1, %w1 : (tensor<2x8x6x6xf16>, tensor<8x4x1x1xf16>) -> tensor<2x4x6x6xf16>
  %d2 = castor.conv2d_backward_data %dy2, %w2 : (tensor<2x8x6x6xf16>, tensor<8x4x1x1xf16>) -> tensor<2x4x6x6xf16>
  %s = castor.add %d1, %d2 : (tensor<2x4x6x6xf16>, tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf16>
  return %s : tensor<2x4x6x6xf16>
}

// -----

// Where it must not fire: the data gradient read elsewhere too, and an add that broadcasts.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: accumulate
// CHECK: castor.add
// CHECK: castor.add
func.func @not_fused(%dy: tensor<2x8x6x6xf32>, %w: tensor<8x4x3x3xf32>, %g: tensor<2x4x6x6xf32>, %b: tensor<4x1x1xf32>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) {
  %d = castor.conv2d_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x6x6xf32>, tensor<8x4x3x3xf32>) -> tensor<2x4x6x6xf32>
  %s = castor.add %d, %g : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %e = castor.conv2d_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x6x6xf32>, tensor<8x4x3x3xf32>) -> tensor<2x4x6x6xf32>
  %t = castor.add %e, %b : (tensor<2x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<2x4x6x6xf32>
  return %s, %d, %t : tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
}

// -----

// A convolution whose input is the step's input (the image) has no data gradient to fold.
// CHECK-LABEL: func.func @no_data_gradient
// CHECK: castor.conv2d_backward_filter
// CHECK: castor.add
func.func @no_data_gradient(%x: tensor<2x4x6x6xf32>, %dy: tensor<2x8x6x6xf32>, %g: tensor<8x4x3x3xf32>) -> tensor<8x4x3x3xf32> {
  %dw = castor.conv2d_backward_filter %x, %dy {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x6x6xf32>, tensor<2x8x6x6xf32>) -> tensor<8x4x3x3xf32>
  %s = castor.add %dw, %g : (tensor<8x4x3x3xf32>, tensor<8x4x3x3xf32>) -> tensor<8x4x3x3xf32>
  return %s : tensor<8x4x3x3xf32>
}
