// RUN: castor-opt %s -castor-autocast='precision=fp16' | FileCheck %s

// Neutral ops take the widest type of their inputs, except for operands that follow the others:
// constants (an exporter's Python scalars) and the parameter added to a matrix product (a linear
// layer's bias: ONNX splits the layer into MatMul and Add, PyTorch AMP adds it in fp16). A
// parameter added to anything else (a positional embedding) still widens the add, as in PyTorch.

// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[B16:.*]] = castor.cast %{{.*}} : tensor<16xf32> to tensor<16xf16>
// CHECK-DAG: %[[HALF16:.*]] = castor.cast %{{.*}} : tensor<f32> to tensor<f16>
// CHECK: %[[MM:.*]] = castor.matmul {{.*}} -> tensor<2x4x16xf16>
// CHECK: %[[BIASED:.*]] = castor.add %[[B16]], %[[MM]] : (tensor<16xf16>, tensor<2x4x16xf16>) -> tensor<2x4x16xf16>
// CHECK: %[[SCALED:.*]] = castor.mul %[[BIASED]], %[[HALF16]] : (tensor<2x4x16xf16>, tensor<f16>) -> tensor<2x4x16xf16>
// CHECK: %[[S32:.*]] = castor.cast %[[SCALED]] : tensor<2x4x16xf16> to tensor<2x4x16xf32>
// CHECK: castor.add %[[S32]], %{{.*}} : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
func.func @forward(%x: tensor<2x4x8xf32> {castor.name = "images"}, %labels: tensor<2xi64> {castor.name = "labels"})
    -> (tensor<f32>) {
  %w = castor.parameter "fc1.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<8x16xf32>
  %b = castor.parameter "fc1.bias" {init = #castor.init<zeros>, trainable} : tensor<16xf32>
  %pos = castor.parameter "pos_embedding" {init = #castor.init<zeros>, trainable} : tensor<4x16xf32>
  %fc = castor.parameter "head.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<10x64xf32>
  %half = castor.constant dense<5.000000e-01> : tensor<f32>
  %mm = castor.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %biased = castor.add %b, %mm : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %scaled = castor.mul %biased, %half : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %embedded = castor.add %scaled, %pos : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
  %f = castor.reshape %embedded : tensor<2x4x16xf32> to tensor<2x64xf32>
  %logits = castor.gemm %f, %fc {trans_b = true} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
