// RUN: castor-opt %s -split-input-file -castor-fuse-batch-norm-relu | FileCheck %s
// RUN: castor-opt %s -split-input-file -castor-fuse-batch-norm-relu -mlir-print-debuginfo | FileCheck %s --check-prefix=NAME

// The fused ops' locations name the ops they replace, so the plan's kernel names say what fused.
// NAME: loc("bn + relu")

// batch norm + relu and its backward: one forward and one backward op; the backward's result
// has no other user, so no residual gradient.
// CHECK-LABEL: func @bn_relu
// CHECK: %[[Y:[^,]*]], %[[M:[^,]*]], %[[S:[^ ]*]] = castor.batch_norm_relu_training %arg0, %arg1, %arg2 {epsilon = 1.000000e-03 : f64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[DX:[^,]*]], %[[DG:[^,]*]], %[[DB:[^ ]*]] = castor.batch_norm_relu_training_backward %arg3, %arg0, %[[Y]], %arg1, %arg2, %[[M]], %[[S]] {epsilon = 1.000000e-03 : f64}
// CHECK-SAME: -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT: castor.relu
// CHECK-NOT: castor.batch_norm_training
// CHECK: return %[[Y]], %[[DX]], %[[DG]], %[[DB]]
func.func @bn_relu(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x3x3xf16>)
    -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b {epsilon = 1.0e-3 : f64}
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) loc("bn")
  %r = castor.relu %y : tensor<2x4x3x3xf16> loc("relu")
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s {epsilon = 1.0e-3 : f64}
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %r, %dx, %dg, %db : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The residual block's end: batch norm + add + relu. The masked gradient also flows to the
// residual's producer: the fused backward's fourth result replaces it there.
// CHECK-LABEL: func @bn_add_relu
// CHECK: %[[Y:[^,]*]], %[[M:[^,]*]], %[[S:[^ ]*]] = castor.batch_norm_relu_training %arg0, %arg1, %arg2 residual(%arg3)
// CHECK: %[[DX:[^,]*]], %{{[^,]*}}, %{{[^,]*}}, %[[DZ:[^ ]*]] = castor.batch_norm_relu_training_backward %arg4, %arg0, %[[Y]], %arg1, %arg2, %[[M]], %[[S]]
// CHECK: %[[SUM:.*]] = castor.add %[[DX]], %[[DZ]]
// CHECK-NOT: castor.add
// CHECK: return %[[Y]], %[[SUM]]
func.func @bn_add_relu(%x: tensor<2x4x3x3xbf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %z: tensor<2x4x3x3xbf16>,
                       %dy: tensor<2x4x3x3xbf16>) -> (tensor<2x4x3x3xbf16>, tensor<2x4x3x3xbf16>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xbf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xbf16>, tensor<4xf32>, tensor<4xf32>)
  %a = castor.add %z, %y : (tensor<2x4x3x3xbf16>, tensor<2x4x3x3xbf16>) -> tensor<2x4x3x3xbf16>
  %r = castor.relu %a : tensor<2x4x3x3xbf16>
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xbf16>, tensor<2x4x3x3xbf16>) -> tensor<2x4x3x3xbf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xbf16>, tensor<2x4x3x3xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xbf16>, tensor<4xf32>, tensor<4xf32>)
  %sum = castor.add %dx, %d : (tensor<2x4x3x3xbf16>, tensor<2x4x3x3xbf16>) -> tensor<2x4x3x3xbf16>
  return %r, %sum : tensor<2x4x3x3xbf16>, tensor<2x4x3x3xbf16>
}

// -----

// The normalised value has a second user: nothing fuses.
// CHECK-LABEL: func @two_users
// CHECK: castor.batch_norm_training
// CHECK: castor.relu
// CHECK-NOT: castor.batch_norm_relu_training
func.func @two_users(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x3x3xf16>)
    -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.relu %y : tensor<2x4x3x3xf16>
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %y, %dx : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}

// -----

// A batch norm the precision policy keeps in fp32 (f32 data in a mixed step): nothing fuses.
// CHECK-LABEL: func @fp32_layer
// CHECK: castor.batch_norm_training
// CHECK-NOT: castor.batch_norm_relu_training
func.func @fp32_layer(%x: tensor<2x4x3x3xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x3x3xf32>)
    -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.relu %y : tensor<2x4x3x3xf32>
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %r, %dx : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>
}

// -----

// Inference-form batch norm: not a training group.
// CHECK-LABEL: func @inference_form
// CHECK: castor.batch_norm_inference
// CHECK: castor.relu
// CHECK-NOT: castor.batch_norm_relu
func.func @inference_form(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %mu: tensor<4xf32>,
                          %var: tensor<4xf32>) -> tensor<2x4x3x3xf16> {
  %y = castor.batch_norm_inference %x, %g, %b, %mu, %var
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf16>
  %r = castor.relu %y : tensor<2x4x3x3xf16>
  return %r : tensor<2x4x3x3xf16>
}

// -----

// A forward without its backward (nothing differentiates the relu): left as it is.
// CHECK-LABEL: func @forward_only
// CHECK: castor.batch_norm_training
// CHECK: castor.relu
// CHECK-NOT: castor.batch_norm_relu
func.func @forward_only(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x4x3x3xf16> {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.relu %y : tensor<2x4x3x3xf16>
  return %r : tensor<2x4x3x3xf16>
}

// -----

// An add that broadcasts (a per-channel bias, not a residual): nothing fuses.
// CHECK-LABEL: func @broadcast_add
// CHECK: castor.batch_norm_training
// CHECK-NOT: castor.batch_norm_relu
func.func @broadcast_add(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<1x4x1x1xf16>,
                         %dy: tensor<2x4x3x3xf16>) -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %a = castor.add %y, %c : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
  %r = castor.relu %a : tensor<2x4x3x3xf16>
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %r, %dx : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}

// -----

// ReLU6: batch norm + clip at 0 and 6, with its clip_backward (which reads the normalised value):
// the fused ops with clip_max 6.
// CHECK-LABEL: func @bn_relu6
// CHECK: %[[Y:[^,]*]], %[[M:[^,]*]], %[[S:[^ ]*]] = castor.batch_norm_relu_training %arg0, %arg1, %arg2 {clip_max = 6.000000e+00 : f64}
// CHECK: %[[DX:[^,]*]], %[[DG:[^,]*]], %[[DB:[^ ]*]] = castor.batch_norm_relu_training_backward %arg3, %arg0, %[[Y]], %arg1, %arg2, %[[M]], %[[S]] {clip_max = 6.000000e+00 : f64}
// CHECK-SAME: -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT: castor.clip
// CHECK-NOT: castor.batch_norm_training
// CHECK: return %[[Y]], %[[DX]], %[[DG]], %[[DB]]
func.func @bn_relu6(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x3x3xf16>)
    -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.clip %y {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x4x3x3xf16>
  %d = castor.clip_backward %dy, %y {min = 0.0 : f64, max = 6.0 : f64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %r, %dx, %dg, %db : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A clip whose lower bound is not 0 is not ReLU6: nothing fuses.
// CHECK-LABEL: func @clip_min_not_zero
// CHECK: castor.batch_norm_training
// CHECK: castor.clip
// CHECK-NOT: castor.batch_norm_relu_training
func.func @clip_min_not_zero(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x3x3xf16>)
    -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %r = castor.clip %y {min = -1.0 : f64, max = 6.0 : f64} : tensor<2x4x3x3xf16>
  %d = castor.clip_backward %dy, %y {min = -1.0 : f64, max = 6.0 : f64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %r, %dx : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}

// -----

// A clip after a residual add: the clip form takes no residual (its gradient needs the sum), so
// nothing fuses.
// CHECK-LABEL: func @add_clip
// CHECK: castor.batch_norm_training
// CHECK: castor.clip
// CHECK-NOT: castor.batch_norm_relu_training
func.func @add_clip(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %z: tensor<2x4x3x3xf16>,
                    %dy: tensor<2x4x3x3xf16>) -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %y, %m, %s = castor.batch_norm_training %x, %g, %b
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %a = castor.add %z, %y : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %r = castor.clip %a {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x4x3x3xf16>
  %d = castor.clip_backward %dy, %a {min = 0.0 : f64, max = 6.0 : f64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %dg, %db = castor.batch_norm_training_backward %d, %x, %g, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %r, %dx : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}
