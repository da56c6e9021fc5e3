// RUN: castor-opt %s -castor-autocast='precision=fp16' | FileCheck %s
// RUN: castor-opt %s -castor-autocast='precision=bf16' | FileCheck --check-prefix=BF16 %s
// RUN: castor-opt %s -castor-autocast='precision=fp16 policy=%S/Inputs/policy.json' | FileCheck --check-prefix=POLICY %s
// RUN: castor-opt %s -castor-autocast='precision=fp16 policy=%S/Inputs/policy-bn-fp32.json' | FileCheck --check-prefix=BNFP32 %s
// RUN: castor-opt %s -castor-autocast='precision=fp16' -castor-make-train-step='optimizer=sgd' | FileCheck --check-prefix=VJP %s
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
// BatchNorm is mixed: no cast around it, fp16 in and out, fp32 parameters and statistics.
// CHECK-NOT: castor.cast %[[C]]
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = castor.batch_norm_training %[[C]], {{.*}} : (tensor<2x4x4x4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf16>, tensor<4xf32>, tensor<4xf32>)
// ReLU follows its input (fp16); the residual add takes the wider of fp16 and the fp32 images.
// CHECK-NOT: castor.cast %[[Y]]
// CHECK: %[[R:.*]] = castor.relu %[[Y]] : tensor<2x4x4x4xf16>
// CHECK: %[[R32:.*]] = castor.cast %[[R]] : tensor<2x4x4x4xf16> to tensor<2x4x4x4xf32>
// CHECK: %[[S:.*]] = castor.add %[[R32]], %arg0 : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK: %[[S16:.*]] = castor.cast %[[S]] : tensor<2x4x4x4xf32> to tensor<2x4x4x4xf16>
// CHECK-NOT: castor.cast %[[W]]
// CHECK: castor.conv2d %[[S16]], %[[W16]]
// The classifier runs in fp16, the loss in fp32.
// CHECK: %[[LOGITS:.*]] = castor.gemm %{{.*}}, %[[FC16]] {trans_b = true} : (tensor<2x64xf16>, tensor<10x64xf16>) -> tensor<2x10xf16>
// CHECK: %[[L32:.*]] = castor.cast %[[LOGITS]] : tensor<2x10xf16> to tensor<2x10xf32>
// CHECK: %[[LOSS:.*]] = castor.softmax_cross_entropy %[[L32]], %arg1 : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
// CHECK: return %[[LOSS]], %[[LOGITS]] : tensor<f32>, tensor<2x10xf16>

// BF16: castor.conv2d {{.*}} -> tensor<2x4x4x4xbf16>
// BF16: castor.batch_norm_training {{.*}} : (tensor<2x4x4x4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xbf16>, tensor<4xf32>, tensor<4xf32>)
// BF16: castor.gemm {{.*}} -> tensor<2x10xbf16>

// The policy keeps the first conv (by layer name) and every gemm (by op type) in fp32.
// POLICY: castor.conv2d %arg0, %{{.*}} {{.*}} : (tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x4x4xf32>
// POLICY: castor.conv2d {{.*}} : (tensor<2x4x4x4xf16>, tensor<4x4x3x3xf16>) -> tensor<2x4x4x4xf16>
// POLICY: castor.gemm {{.*}} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>

// The policy's "fp32" for batch_norm_training gives BatchNorm fp32 input and output again.
// BNFP32: %[[C:.*]] = castor.conv2d {{.*}} -> tensor<2x4x4x4xf16>
// BNFP32: %[[C32:.*]] = castor.cast %[[C]] : tensor<2x4x4x4xf16> to tensor<2x4x4x4xf32>
// BNFP32: %[[Y:.*]], %{{.*}}, %{{.*}} = castor.batch_norm_training %[[C32]], {{.*}} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
// BNFP32: castor.relu %[[Y]] : tensor<2x4x4x4xf32>

// The VJP keeps the forward's precision: dy and dx in fp16, dscale and dbias in fp32, and the
// running statistics update in fp32.
// VJP-LABEL: func.func @train_step
// VJP: %[[RB:.*]] = castor.relu_backward {{.*}} -> tensor<2x4x4x4xf16>
// VJP: castor.batch_norm_training_backward %[[RB]], {{.*}} : (tensor<2x4x4x4xf16>, tensor<2x4x4x4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf16>, tensor<4xf32>, tensor<4xf32>)
// VJP: castor.batch_norm_running_update {{.*}} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)

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
