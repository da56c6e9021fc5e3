// RUN: castor-opt %s -split-input-file -castor-recompute="policy=cheap" | FileCheck %s --check-prefix=CHEAP
// RUN: castor-opt %s -split-input-file -castor-recompute="policy=none" | FileCheck %s --check-prefix=NONE
// RUN: castor-opt %s -split-input-file -castor-recompute="policy=auto memory-budget=1GiB" | FileCheck %s --check-prefix=ROOMY

// A batch norm + relu whose output the backward reads (relu_backward). cheap: the relu is
// recomputed before its backward reader, from a batch_norm_apply of the forward's statistics
// (the batch norm's output has no backward reader of its own: copied so that it does not live
// on); none, or auto with room to spare: unchanged.
// CHEAP-LABEL: func @bn_relu
// CHEAP-SAME: castor.recompute_policy = "cheap", castor.recomputed_values = 1
// CHEAP: %[[Y:[^,]*]], %[[M:[^,]*]], %[[S:[^ ]*]] = castor.batch_norm_training %arg0, %arg1, %arg2
// CHEAP: castor.relu %[[Y]] :
// CHEAP: castor.softmax_cross_entropy
// CHEAP: %[[Y2:.*]] = castor.batch_norm_apply %arg0, %arg1, %arg2, %[[M]], %[[S]] {castor.recomputed}
// CHEAP: %[[R2:.*]] = castor.relu %[[Y2]] {castor.recomputed}
// CHEAP: castor.relu_backward %arg5, %[[R2]]
// NONE-LABEL: func @bn_relu
// NONE-NOT: castor.recomputed
// ROOMY-LABEL: func @bn_relu
// ROOMY-SAME: castor.recomputed_values = 0
// ROOMY-NOT: castor.recomputed}
func.func @bn_relu(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %logits: tensor<2x4xf32>,
                   %labels: tensor<2xi64>, %dy: tensor<2x4x3x3xf16>)
    -> (tensor<f32>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.relu %y : tensor<2x4x3x3xf16>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %loss, %dx, %dg, %db : tensor<f32>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The fused batch norm + add + relu: its output again from the statistics, with the residual
// and relu. The statistics (results 1 and 2) are never recomputed.
// CHEAP-LABEL: func @fused_residual
// CHEAP: %[[Y:[^,]*]], %[[M:[^,]*]], %[[S:[^ ]*]] = castor.batch_norm_relu_training %arg0, %arg1, %arg2 residual(%arg3)
// CHEAP: castor.softmax_cross_entropy
// CHEAP: %[[Y2:.*]] = castor.batch_norm_apply %arg0, %arg1, %arg2, %[[M]], %[[S]] residual(%arg3) {castor.recomputed, relu = true}
// CHEAP: castor.batch_norm_relu_training_backward %arg6, %arg0, %[[Y2]], %arg1, %arg2, %[[M]], %[[S]]
// CHEAP-NOT: castor.recomputed
func.func @fused_residual(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %z: tensor<2x4x3x3xf16>,
                          %logits: tensor<2x4xf32>, %labels: tensor<2xi64>, %dy: tensor<2x4x3x3xf16>)
    -> (tensor<f32>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) {
  %y, %m, %s = castor.batch_norm_relu_training %x, %g, %b residual(%z)
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %dx, %dg, %db = castor.batch_norm_relu_training_backward %dy, %x, %y, %g, %b, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
         tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %loss, %dx, %dg, %db : tensor<f32>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The fused batch norm + ReLU6 (clip_max): its output again from the statistics with the same
// clip.
// CHEAP-LABEL: func @fused_relu6
// CHEAP-SAME: castor.recomputed_values = 1
// CHEAP: %[[Y:[^,]*]], %[[M:[^,]*]], %[[S:[^ ]*]] = castor.batch_norm_relu_training %arg0, %arg1, %arg2 {clip_max = 6.000000e+00 : f64}
// CHEAP: castor.softmax_cross_entropy
// CHEAP: %[[Y2:.*]] = castor.batch_norm_apply %arg0, %arg1, %arg2, %[[M]], %[[S]] {castor.recomputed, clip_max = 6.000000e+00 : f64, relu = true}
// CHEAP: castor.batch_norm_relu_training_backward %arg5, %arg0, %[[Y2]], %arg1, %arg2, %[[M]], %[[S]] {clip_max = 6.000000e+00 : f64}
func.func @fused_relu6(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %logits: tensor<2x4xf32>,
                       %labels: tensor<2xi64>, %dy: tensor<2x4x3x3xf16>)
    -> (tensor<f32>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) {
  %y, %m, %s = castor.batch_norm_relu_training %x, %g, %b {clip_max = 6.0 : f64}
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %dx, %dg, %db = castor.batch_norm_relu_training_backward %dy, %x, %y, %g, %b, %m, %s {clip_max = 6.0 : f64}
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
         tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %loss, %dx, %dg, %db : tensor<f32>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A convolution's output is kept by cheap (compute-bound); the relu after it is recomputed.
// CHEAP-LABEL: func @conv_kept
// CHEAP: %[[C:.*]] = castor.conv2d %arg0, %arg1
// CHEAP: castor.softmax_cross_entropy
// CHEAP-NOT: castor.conv2d
// CHEAP: %[[R2:.*]] = castor.relu %[[C]] {castor.recomputed}
// CHEAP: castor.relu_backward %arg4, %[[R2]]
func.func @conv_kept(%x: tensor<2x4x3x3xf16>, %w: tensor<4x4x1x1xf16>, %logits: tensor<2x4xf32>,
                     %labels: tensor<2xi64>, %dy: tensor<2x4x3x3xf16>) -> (tensor<f32>, tensor<2x4x3x3xf16>) {
  %c = castor.conv2d %x, %w : (tensor<2x4x3x3xf16>, tensor<4x4x1x1xf16>) -> tensor<2x4x3x3xf16>
  %r = castor.relu %c : tensor<2x4x3x3xf16>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dc = castor.relu_backward %d, %c : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  return %loss, %dc : tensor<f32>, tensor<2x4x3x3xf16>
}
