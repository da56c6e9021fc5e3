// RUN: castor-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(castor-select-kernels,castor-plan-views,castor-plan-memory))' | FileCheck %s

// A reshape of an activation is a view: same bytes, and the buffer lives until the last reader
// of any shape of it (%4, another view of %1, is read after %3 is written: %3 cannot take the
// bytes).
// CHECK-LABEL: func @view
func.func @view(%x: tensor<4x64xf32>) -> tensor<256xf32> {
  // CHECK: castor.relu {{.*}}castor.offsets = array<i64: [[R:[0-9]+]]>
  %1 = castor.relu %x : tensor<4x64xf32>
  // CHECK: castor.reshape {{.*}}castor.offsets = array<i64: [[R]]>, castor.view}
  %2 = castor.reshape %1 : tensor<4x64xf32> to tensor<256xf32>
  // CHECK: castor.relu {{.*}}castor.offsets = array<i64: [[A:[0-9]+]]>
  // CHECK-NOT: castor.offsets = array<i64: [[R]]>
  %3 = castor.relu %2 : tensor<256xf32>
  // CHECK: castor.reshape {{.*}}castor.offsets = array<i64: [[R]]>, castor.view}
  %4 = castor.reshape %1 : tensor<4x64xf32> to tensor<256xf32>
  %5 = castor.add %3, %4 : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  return %5 : tensor<256xf32>
}

// -----

// Not views: a reshape of a function argument or of a parameter, and a reshape whose result
// is returned (a plan's outputs are their own tensors).
// CHECK-LABEL: func @not_views
// CHECK-NOT: castor.view
// CHECK: return
func.func @not_views(%x: tensor<4x64xf32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) {
  %w = castor.parameter "w" {trainable} : tensor<4x64xf32>
  %1 = castor.reshape %x : tensor<4x64xf32> to tensor<256xf32>
  %2 = castor.reshape %w : tensor<4x64xf32> to tensor<256xf32>
  %3 = castor.relu %x : tensor<4x64xf32>
  %4 = castor.reshape %3 : tensor<4x64xf32> to tensor<256xf32>
  return %1, %2, %4 : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
}

// -----

// A gradient that is unscaled in place is not a view, nor viewed: the in-place write would
// change what the other shape reads.
// CHECK-LABEL: func @in_place
// CHECK-NOT: castor.view
// CHECK: return
func.func @in_place(%x: tensor<4x64xf32>, %s: tensor<f32>) -> (tensor<256xf32>, tensor<f32>) {
  %1 = castor.relu %x : tensor<4x64xf32>
  %2 = castor.reshape %1 : tensor<4x64xf32> to tensor<256xf32>
  %3:2 = castor.unscale_gradients %2 scale %s : (tensor<256xf32>, tensor<f32>) -> (tensor<256xf32>, tensor<f32>)
  %4 = castor.relu %3#0 : tensor<256xf32>
  return %4, %3#1 : tensor<256xf32>, tensor<f32>
}

// -----

// A convolution's output is stored channels-last on CUDA, where another shape cannot read its
// bytes in place: flattening it copies. After global pooling ([N, C, 1, 1]) both orders are the
// same bytes, and the flatten is a view.
// CHECK-LABEL: func @channels_last
func.func @channels_last(%x: tensor<2x3x8x8xf32>) -> tensor<2x4xf32> {
  %w = castor.parameter "w" {trainable} : tensor<4x3x3x3xf32>
  %c = castor.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: castor.reshape %{{.*}} {castor.kernel = "reshape", castor.offsets = array<i64: {{[0-9]+}}>} : tensor<2x4x8x8xf32> to tensor<2x256xf32>
  %f = castor.reshape %c : tensor<2x4x8x8xf32> to tensor<2x256xf32>
  %r = castor.relu %f : tensor<2x256xf32>
  %p = castor.global_avg_pool %c : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: castor.flatten {{.*}}castor.view
  %q = castor.flatten %p : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %w2 = castor.parameter "w2" {trainable} : tensor<256x4xf32>
  %m = castor.matmul %r, %w2 : (tensor<2x256xf32>, tensor<256x4xf32>) -> tensor<2x4xf32>
  %o = castor.add %q, %m : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %o : tensor<2x4xf32>
}
