// RUN: castor-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(castor-select-kernels,castor-plan-views,castor-plan-memory))' | FileCheck %s
// With transposes=false (castor compile --transposed-views=false) every transpose copies.
// RUN: castor-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(castor-select-kernels,castor-plan-views{transposes=false}))' | FileCheck %s --check-prefix=OFF
// OFF-NOT: castor.transpose {{.*}}castor.view

// ConvNeXt's block: a convolution's output stored channels-last is [N,H,W,C] row-major byte for
// byte, so the permute to the layer norm and the pointwise linear layers is a view (the same
// offset), and so is the permute back, whose result the residual add reads channels-last. The
// transposes' buffers live until the last reader of either shape.
// CHECK-LABEL: func @convnext_block
func.func @convnext_block(%x: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %w = castor.parameter "dw" {trainable} : tensor<8x1x3x3xf32>
  %g = castor.parameter "ln.weight" {trainable} : tensor<8xf32>
  %b = castor.parameter "ln.bias" {trainable} : tensor<8xf32>
  %w1 = castor.parameter "fc1" {trainable} : tensor<16x8xf32>
  %w2 = castor.parameter "fc2" {trainable} : tensor<8x16xf32>
  // CHECK: castor.conv2d {{.*}}castor.offsets = array<i64: [[C:[0-9]+]]>
  %c = castor.conv2d %x, %w {groups = 8 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x4x4xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: castor.transpose {{.*}}castor.offsets = array<i64: [[C]]>, castor.view, perm = array<i64: 0, 2, 3, 1>
  %t = castor.transpose %c {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x4x8xf32>
  %n:3 = castor.layer_norm %t, %g, %b {epsilon = 1.0e-6 : f64} : (tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x4x1xf32>, tensor<2x4x4x1xf32>)
  %r = castor.reshape %n#0 : tensor<2x4x4x8xf32> to tensor<32x8xf32>
  %h = castor.gemm %r, %w1 {trans_b = true} : (tensor<32x8xf32>, tensor<16x8xf32>) -> tensor<32x16xf32>
  %a = castor.gelu %h : tensor<32x16xf32>
  %o = castor.gemm %a, %w2 {trans_b = true} : (tensor<32x16xf32>, tensor<8x16xf32>) -> tensor<32x8xf32>
  // CHECK: castor.reshape {{.*}}castor.offsets = array<i64: [[O:[0-9]+]]>, castor.view} : tensor<32x8xf32> to tensor<2x4x4x8xf32>
  %v = castor.reshape %o : tensor<32x8xf32> to tensor<2x4x4x8xf32>
  // CHECK: castor.transpose {{.*}}castor.offsets = array<i64: [[O]]>, castor.view, perm = array<i64: 0, 3, 1, 2>
  %p = castor.transpose %v {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x8xf32>) -> tensor<2x8x4x4xf32>
  // The layer norm's input (the conv's bytes) is read after the block: nothing else takes them.
  // CHECK: castor.add {{.*}}castor.offsets = array<i64: [[S:[0-9]+]]>
  // CHECK-NOT: castor.offsets = array<i64: [[C]]>
  // CHECK: castor.layer_norm
  %s = castor.add %p, %x : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %n2:3 = castor.layer_norm %t, %g, %b {epsilon = 1.0e-6 : f64} : (tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x4x1xf32>, tensor<2x4x4x1xf32>)
  %q = castor.transpose %n2#0 {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x8xf32>) -> tensor<2x8x4x4xf32>
  %y = castor.add %s, %q : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %y : tensor<2x8x4x4xf32>
}

// -----

// Transposes that stay: another perm; a function argument (stored as the caller gives it); a
// result that is returned; and a [N,C,H,W] side that a matmul reads as rows, so it cannot be
// stored channels-last.
// CHECK-LABEL: func @stay
// CHECK-NOT: castor.view
// CHECK: return
func.func @stay(%x: tensor<2x8x4x4xf32>, %m: tensor<4x3xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>, tensor<2x8x4x3xf32>) {
  %a = castor.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x4x8xf32>
  %r = castor.relu %x : tensor<2x8x4x4xf32>
  %b = castor.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
  %u = castor.relu %a : tensor<2x4x4x8xf32>
  %c = castor.transpose %u {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x8xf32>) -> tensor<2x8x4x4xf32>
  %e = castor.relu %x : tensor<2x8x4x4xf32>
  %f = castor.transpose %e {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x4x8xf32>
  %g = castor.matmul %e, %m : (tensor<2x8x4x4xf32>, tensor<4x3xf32>) -> tensor<2x8x4x3xf32>
  return %c, %f, %b, %g : tensor<2x8x4x4xf32>, tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>, tensor<2x8x4x3xf32>
}

// -----

// A layer norm over the [N,C,H,W] side's last axis (a group that must be row-major) keeps the
// transpose; the one beside it, of a tensor nothing else constrains, is a view.
// CHECK-LABEL: func @row_major_reader
func.func @row_major_reader(%x: tensor<2x8x4x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) {
  %r = castor.relu %x : tensor<2x8x4x4xf32>
  // CHECK: castor.transpose %{{.*}} {castor.kernel = "transpose", castor.offsets = array<i64: {{[0-9]+}}>, perm = array<i64: 0, 2, 3, 1>}
  %t = castor.transpose %r {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x4x8xf32>
  %n:3 = castor.layer_norm %r, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x8x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x1xf32>, tensor<2x8x4x1xf32>)
  // CHECK: castor.transpose {{.*}}castor.view, perm = array<i64: 0, 3, 1, 2>
  %u = castor.relu %t : tensor<2x4x4x8xf32>
  %p = castor.transpose %u {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x8xf32>) -> tensor<2x8x4x4xf32>
  %y = castor.add %p, %n#0 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %z = castor.relu %y : tensor<2x8x4x4xf32>
  return %z, %y : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>
}
