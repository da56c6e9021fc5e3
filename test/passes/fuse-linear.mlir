// RUN: castor-opt %s -split-input-file -castor-fuse-linear | FileCheck %s

// torch.onnx's linear layer on tokens: MatMul by the transposed weight, then Add of the bias,
// becomes one gemm over the rows (weight read transposed, bias in the gemm).
// CHECK-LABEL: func.func @tokens
// CHECK-DAG: %[[W:.*]] = castor.parameter "fc.weight"
// CHECK-DAG: %[[B:.*]] = castor.parameter "fc.bias"
// CHECK-NOT: castor.transpose
// CHECK: %[[X:.*]] = castor.reshape %arg0 : tensor<2x5x8xf32> to tensor<10x8xf32>
// CHECK: %[[G:.*]] = castor.gemm %[[X]], %[[W]], %[[B]] {trans_b = true} : (tensor<10x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<10x16xf32>
// CHECK: %[[Y:.*]] = castor.reshape %[[G]] : tensor<10x16xf32> to tensor<2x5x16xf32>
// CHECK-NOT: castor.add
// CHECK: return %[[Y]]
func.func @tokens(%x: tensor<2x5x8xf32>) -> tensor<2x5x16xf32> {
  %w = castor.parameter "fc.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<16x8xf32>
  %b = castor.parameter "fc.bias" {init = #castor.init<zeros>, trainable} : tensor<16xf32>
  %wt = castor.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = castor.matmul %x, %wt : (tensor<2x5x8xf32>, tensor<8x16xf32>) -> tensor<2x5x16xf32>
  %y = castor.add %b, %m : (tensor<16xf32>, tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  return %y : tensor<2x5x16xf32>
}

// -----

// Without a bias, and the product with another user besides: a gemm without C.
// CHECK-LABEL: func.func @no_bias
// CHECK: %[[G:.*]] = castor.gemm %{{.*}}, %{{.*}} {trans_b = true} : (tensor<10x8xf32>, tensor<16x8xf32>) -> tensor<10x16xf32>
// CHECK: castor.reshape %[[G]] : tensor<10x16xf32> to tensor<2x5x16xf32>
func.func @no_bias(%x: tensor<2x5x8xf32>, %c: tensor<16xf32>) -> (tensor<2x5x16xf32>, tensor<2x5x16xf32>) {
  %w = castor.parameter "fc.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<16x8xf32>
  %wt = castor.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = castor.matmul %x, %wt : (tensor<2x5x8xf32>, tensor<8x16xf32>) -> tensor<2x5x16xf32>
  %y = castor.add %c, %m : (tensor<16xf32>, tensor<2x5x16xf32>) -> tensor<2x5x16xf32>
  return %y, %m : tensor<2x5x16xf32>, tensor<2x5x16xf32>
}

// -----

// A product by a computed tensor (attention's scores) is left alone, and so is a product whose
// transposed operand is not a parameter.
// CHECK-LABEL: func.func @not_linear
// CHECK-NOT: castor.gemm
// CHECK: castor.matmul
// CHECK: castor.matmul
func.func @not_linear(%q: tensor<2x5x8xf32>, %k: tensor<8x5xf32>, %v: tensor<16x8xf32>) -> (tensor<2x5x5xf32>, tensor<2x5x16xf32>) {
  %s = castor.matmul %q, %k : (tensor<2x5x8xf32>, tensor<8x5xf32>) -> tensor<2x5x5xf32>
  %vt = castor.transpose %v {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %o = castor.matmul %q, %vt : (tensor<2x5x8xf32>, tensor<8x16xf32>) -> tensor<2x5x16xf32>
  return %s, %o : tensor<2x5x5xf32>, tensor<2x5x16xf32>
}
