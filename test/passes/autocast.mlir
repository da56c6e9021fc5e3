// RUN: castor-opt %s -castor-autocast='precision=fp16' | FileCheck %s
// RUN: castor-opt %s -castor-autocast='precision=bf16' | FileCheck --check-prefix=BF16 %s
// RUN: castor-opt %s -castor-autocast='precision=fp16 policy=%S/Inputs/policy.json' | FileCheck --check-prefix=POLICY %s
// RUN: not castor-opt %s -castor-autocast='precision=fp16 policy=%S/Inputs/missing.json' 2>&1 | FileCheck --check-prefix=MISSING %s

// A conv-BN-ReLU block with a residual add, a second conv reusing the first weight, the
// classifier and the loss.

// Each weight is cast once, right after its definition, and that copy serves every use; the
// input is cast for the convolution, which runs in fp16.
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[X16:.*]] = castor.cast %arg0 : tensor<2x4x4x4xf32> to tensor<2x4x4x4xf16>
// CHECK-DAG: %[[W:.*]] = castor.parameter "conv1.weight"
// CHECK-DAG: %[[W16:.*]] = castor.cast %[[W]] : tensor<4x4x3x3xf32> to tensor<4x4x3x3xf16>
// CHECK-DAG: %[[FC16:.*]] = castor.cast %{{.*}} : tensor<10x64xf32> to tensor<10x64xf16>
// CHECK: %[[C:.*]] = castor.conv2d %[[X16]], %[[W16]] {{.*}} -> tensor<2x4x4x4xf16>
// BatchNorm sees fp32 input and fp32 parameters.
// CHECK: %[[C32:.*]] = castor.cast %[[C]] : tensor<2x4x4x4xf16> to tensor<2x4x4x4xf32>
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = castor.batch_norm_training %[[C32]], {{.*}} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// ReLU and the residual add follow their inputs (fp32 here).
// CHECK: %[[R:.*]] = castor.relu %[[Y]] : tensor<2x4x4x4xf32>
// CHECK: %[[S:.*]] = castor.add %[[R]], %arg0 : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK: %[[S16:.*]] = castor.cast %[[S]] : tensor<2x4x4x4xf32> to tensor<2x4x4x4xf16>
// CHECK-NOT: castor.cast %[[W]]
// CHECK: castor.conv2d %[[S16]], %[[W16]]
// The classifier runs in fp16, the loss in fp32.
// CHECK: %[[LOGITS:.*]] = castor.gemm %{{.*}}, %[[FC16]] {trans_b = true} : (tensor<2x64xf16>, tensor<10x64xf16>) -> tensor<2x10xf16>
// CHECK: %[[L32:.*]] = castor.cast %[[LOGITS]] : tensor<2x10xf16> to tensor<2x10xf32>
// CHECK: %[[LOSS:.*]] = castor.softmax_cross_entropy %[[L32]], %arg1 : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
// CHECK: return %[[LOSS]], %[[LOGITS]] : tensor<f32>, tensor<2x10xf16>

// BF16: castor.conv2d {{.*}} -> tensor<2x4x4x4xbf16>
// BF16: castor.batch_norm_training {{.*}} : (tensor<2x4x4x4xf32>,
// BF16: castor.gemm {{.*}} -> tensor<2x10xbf16>

// The policy keeps the first conv (by layer name) and every gemm (by op type) in fp32.
// POLICY: castor.conv2d %arg0, %{{.*}} {{.*}} : (tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x4x4xf32>
// POLICY: castor.conv2d {{.*}} : (tensor<2x4x4x4xf16>, tensor<4x4x3x3xf16>) -> tensor<2x4x4x4xf16>
// POLICY: castor.gemm {{.*}} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>

// MISSING: error: cannot read precision policy '{{.*}}missing.json'
func.func @forward(%x: tensor<2x4x4x4xf32> {castor.name = "images"}, %labels: tensor<2xi64> {castor.name = "labels"})
    -> (tensor<f32>, tensor<2x10xf32>) {
  %w = castor.parameter "conv1.weight" {init = #castor.init<kaiming_normal>, trainable} : tensor<4x4x3x3xf32>
  %g = castor.parameter "bn.weight" {init = #castor.init<ones>, trainable} : tensor<4xf32>
  %b = castor.parameter "bn.bias" {init = #castor.init<zeros>, trainable} : tensor<4xf32>
  %rm = castor.parameter "bn.running_mean" {init = #castor.init<zeros>} : tensor<4xf32>
  %rv = castor.parameter "bn.running_var" {init = #castor.init<ones>} : tensor<4xf32>
  %fc = castor.parameter "fc.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<10x64xf32>
  %c = castor.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x4x4xf32> loc("/conv1/Conv")
  %y, %m, %s = castor.batch_norm_training %c, %g, %b running(%rm, %rv) : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.relu %y : tensor<2x4x4x4xf32>
  %sum = castor.add %r, %x : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c2 = castor.conv2d %sum, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x4x4xf32> loc("/conv2/Conv")
  %f = castor.flatten %c2 : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  %logits = castor.gemm %f, %fc {trans_b = true} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<2x10xf32>
}
