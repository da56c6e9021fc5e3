// RUN: castor-opt %s -split-input-file -castor-fuse-attention | FileCheck %s
// RUN: castor import %fixtures/torchvision/vit_b_16_train.onnx --init kaiming | castor-opt -castor-fuse-linear -castor-fuse-gelu -castor-fuse-attention | FileCheck --check-prefix=VIT %s
// RUN: castor compile %fixtures/torchvision/vit_b_16_train.onnx --init kaiming --batch 1 --train --precision fp16 -o %t.fused.plan 2>&1 | FileCheck --check-prefix=FUSED %s
// RUN: castor compile %fixtures/torchvision/vit_b_16_train.onnx --init kaiming --batch 1 --train --precision fp32 -o %t.fp32.plan 2>&1 | FileCheck --check-prefix=FP32 %s

// ViT-B/16 as torch.onnx exports it: each of the 12 blocks' attention is one op, with the scale
// split over q and k (8^-1/2 each) multiplied back into 1/8, and no softmax left.
// VIT-COUNT-12: castor.attention {{.*}} {scale = 0.12499999{{[0-9]*}} : f64} : (tensor<1x12x197x64xf32>, tensor<1x12x197x64xf32>, tensor<1x12x197x64xf32>) -> (tensor<1x12x197x64xf32>, tensor<1x12x197x1xf32>)
// VIT-NOT: castor.softmax
// VIT-NOT: castor.attention

// A mixed-precision step fuses it (forward and backward); an f32 step keeps the chain, since the
// fused kernel runs in f16 or bf16.
// FUSED-DAG: attention 12
// FUSED-DAG: attention_backward 12
// FUSED-NOT: softmax 12
// FP32-NOT: attention 12
// FP32: softmax 12

// The exported form: q scaled, k transposed and scaled, the scores' softmax over the last axis.
// CHECK-LABEL: func @split_scale
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x64xf32>, %[[K:.*]]: tensor<2x4x16x64xf32>, %[[V:.*]]: tensor<2x4x16x32xf32>)
// CHECK-NOT: castor.constant
// CHECK: %[[O:.*]], %{{.*}} = castor.attention %[[Q]], %[[K]], %[[V]] {scale = 0.12499999{{[0-9]*}} : f64}
// CHECK-SAME: -> (tensor<2x4x16x32xf32>, tensor<2x4x16x1xf32>)
// CHECK-NOT: castor.matmul
// CHECK-NOT: castor.softmax
// CHECK: return %[[O]]
func.func @split_scale(%q: tensor<2x4x16x64xf32>, %k: tensor<2x4x16x64xf32>, %v: tensor<2x4x16x32xf32>) -> tensor<2x4x16x32xf32> {
  %c1 = castor.constant dense<0.353553385> : tensor<1xf32>
  %qs = castor.mul %q, %c1 : (tensor<2x4x16x64xf32>, tensor<1xf32>) -> tensor<2x4x16x64xf32>
  %kt = castor.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x16x64xf32>) -> tensor<2x4x64x16xf32>
  %c2 = castor.constant dense<0.353553385> : tensor<1xf32>
  %ks = castor.mul %kt, %c2 : (tensor<2x4x64x16xf32>, tensor<1xf32>) -> tensor<2x4x64x16xf32>
  %s = castor.matmul %qs, %ks : (tensor<2x4x16x64xf32>, tensor<2x4x64x16xf32>) -> tensor<2x4x16x16xf32>
  %p = castor.softmax %s : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %o = castor.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x32xf32>
  return %o : tensor<2x4x16x32xf32>
}

// -----

// The scores scaled after the product (timm's `(q @ k.transpose(-2, -1)) * scale`), with
// neither q nor k scaled, and no scale at all.
// CHECK-LABEL: func @scaled_scores
// CHECK: castor.attention %{{.*}} {scale = 2.500000e-01 : f64}
// CHECK: castor.attention %{{.*}} {scale = 1.000000e+00 : f64}
func.func @scaled_scores(%q: tensor<1x2x8x16xf16>, %k: tensor<1x2x8x16xf16>, %v: tensor<1x2x8x16xf16>) -> (tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>) {
  %kt = castor.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x8x16xf16>) -> tensor<1x2x16x8xf16>
  %s = castor.matmul %q, %kt : (tensor<1x2x8x16xf16>, tensor<1x2x16x8xf16>) -> tensor<1x2x8x8xf16>
  %c = castor.constant dense<0.25> : tensor<f16>
  %ss = castor.mul %s, %c : (tensor<1x2x8x8xf16>, tensor<f16>) -> tensor<1x2x8x8xf16>
  %p = castor.softmax %ss {axis = 3 : i64} : (tensor<1x2x8x8xf16>) -> tensor<1x2x8x8xf16>
  %o = castor.matmul %p, %v : (tensor<1x2x8x8xf16>, tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16>
  %kt2 = castor.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x8x16xf16>) -> tensor<1x2x16x8xf16>
  %s2 = castor.matmul %q, %kt2 : (tensor<1x2x8x16xf16>, tensor<1x2x16x8xf16>) -> tensor<1x2x8x8xf16>
  %p2 = castor.softmax %s2 : (tensor<1x2x8x8xf16>) -> tensor<1x2x8x8xf16>
  %o2 = castor.matmul %p2, %v : (tensor<1x2x8x8xf16>, tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16>
  return %o, %o2 : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>
}

// -----

// Where it must not fire: the probabilities read elsewhere (an attention map returned), the
// softmax over another axis, a head size cuDNN's fused attention does not take (12: not a
// multiple of 8), and an additive bias on the scores (Swin's relative positions).
// CHECK-LABEL: func @not_fused
// CHECK-NOT: castor.attention
// CHECK: return
func.func @not_fused(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>,
                     %q12: tensor<1x2x8x12xf32>, %k12: tensor<1x2x8x12xf32>, %bias: tensor<1x2x8x8xf32>)
    -> (tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) {
  %kt = castor.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x8x16xf32>) -> tensor<1x2x16x8xf32>
  %s = castor.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p = castor.softmax %s : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = castor.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>

  %kt2 = castor.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x8x16xf32>) -> tensor<1x2x16x8xf32>
  %s2 = castor.matmul %q, %kt2 : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p2 = castor.softmax %s2 {axis = 2 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o2 = castor.matmul %p2, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>

  %kt3 = castor.transpose %k12 {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x8x12xf32>) -> tensor<1x2x12x8xf32>
  %s3 = castor.matmul %q12, %kt3 : (tensor<1x2x8x12xf32>, tensor<1x2x12x8xf32>) -> tensor<1x2x8x8xf32>
  %p3 = castor.softmax %s3 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o3 = castor.matmul %p3, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>

  %kt4 = castor.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x8x16xf32>) -> tensor<1x2x16x8xf32>
  %s4 = castor.matmul %q, %kt4 : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %b4 = castor.add %s4, %bias : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p4 = castor.softmax %b4 : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o4 = castor.matmul %p4, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %o, %p, %o2, %o3, %o4 : tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
}
