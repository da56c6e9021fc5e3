// RUN: castor-opt %s -split-input-file -castor-fuse-gelu | FileCheck %s
// RUN: castor import %fixtures/torchvision/vit_b_16_train.onnx --init kaiming | castor-opt -castor-fuse-linear -castor-fuse-gelu | FileCheck --check-prefix=VIT %s

// ViT-B/16 as torch.onnx exports it: every MLP's GELU fused, no erf left, and every linear
// layer on tokens a gemm (48: attention in/out projections and the two MLP layers of 12 blocks,
// plus the head, which the exporter already wrote as Gemm).
// RUN: castor import %fixtures/torchvision/vit_b_16_train.onnx --init kaiming | castor-opt -castor-fuse-linear -castor-fuse-gelu | grep -c castor.gemm | FileCheck --check-prefix=GEMMS %s
// castor compile runs both passes by default; --fuse none keeps the exported ops.
// RUN: castor compile %fixtures/torchvision/vit_b_16_train.onnx --init kaiming --batch 1 --train -o %t.fused.plan 2>&1 | FileCheck --check-prefix=FUSED %s
// RUN: castor compile %fixtures/torchvision/vit_b_16_train.onnx --init kaiming --batch 1 --train --fuse none -o %t.plan 2>&1 | FileCheck --check-prefix=NOFUSE %s
// FUSED-NOT: erf 12
// FUSED: gelu 12
// FUSED-NOT: erf 12
// NOFUSE-NOT: gelu 12
// NOFUSE: erf 12
// NOFUSE-NOT: gelu 12
// VIT-COUNT-12: castor.gelu
// VIT-NOT: castor.erf
// GEMMS: {{^}}49{{$}}

// torch.onnx's chain: x * (1 + erf(x * (1/sqrt 2))), then * 0.5, becomes one gelu.
// CHECK-LABEL: func.func @exported
// CHECK-NEXT: %[[G:.*]] = castor.gelu %arg0 : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @exported(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %k = castor.constant dense<0.707106769> : tensor<f32>
  %one = castor.constant dense<1.000000e+00> : tensor<f32>
  %half = castor.constant dense<5.000000e-01> : tensor<f32>
  %s = castor.mul %x, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = castor.erf %s : tensor<2x8xf32>
  %a = castor.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %p = castor.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = castor.mul %p, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// The half taken first, constants on the left and of shape [1].
// CHECK-LABEL: func.func @half_first
// CHECK-NEXT: %[[G:.*]] = castor.gelu %arg0 : tensor<4xf32>
// CHECK-NEXT: return %[[G]]
func.func @half_first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %k = castor.constant dense<0.707106769> : tensor<1xf32>
  %one = castor.constant dense<1.000000e+00> : tensor<1xf32>
  %half = castor.constant dense<5.000000e-01> : tensor<1xf32>
  %h = castor.mul %half, %x : (tensor<1xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = castor.mul %k, %x : (tensor<1xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = castor.erf %s : tensor<4xf32>
  %a = castor.add %one, %e : (tensor<1xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = castor.mul %h, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Not GELU: the erf's argument is scaled by another constant.
// CHECK-LABEL: func.func @other_scale
// CHECK-NOT: castor.gelu
// CHECK: castor.erf
func.func @other_scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %k = castor.constant dense<0.5> : tensor<f32>
  %one = castor.constant dense<1.000000e+00> : tensor<f32>
  %half = castor.constant dense<5.000000e-01> : tensor<f32>
  %s = castor.mul %x, %k : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e = castor.erf %s : tensor<4xf32>
  %a = castor.add %e, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %p = castor.mul %x, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = castor.mul %p, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// An intermediate with another user (the erf's value is returned too): no fusion, the chain
// stays whole.
// CHECK-LABEL: func.func @shared_intermediate
// CHECK-NOT: castor.gelu
// CHECK: castor.erf
func.func @shared_intermediate(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %k = castor.constant dense<0.707106769> : tensor<f32>
  %one = castor.constant dense<1.000000e+00> : tensor<f32>
  %half = castor.constant dense<5.000000e-01> : tensor<f32>
  %s = castor.mul %x, %k : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e = castor.erf %s : tensor<4xf32>
  %a = castor.add %e, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %p = castor.mul %x, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = castor.mul %p, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y, %e : tensor<4xf32>, tensor<4xf32>
}
