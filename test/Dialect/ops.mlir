// RUN: castor-opt %s -split-input-file | castor-opt -split-input-file | FileCheck %s
// RUN: castor-opt %s -split-input-file -mlir-print-op-generic | castor-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func @conv_bn_relu
func.func @conv_bn_relu(%x: tensor<2x3x32x32xf32>) -> tensor<2x8x16x16xf32> {
  // CHECK: castor.parameter "conv.weight" {init = #castor.init<kaiming_normal>, trainable} : tensor<8x3x3x3xf32>
  %w = castor.parameter "conv.weight" {init = #castor.init<kaiming_normal>, trainable} : tensor<8x3x3x3xf32>
  // CHECK: castor.conv2d %{{.*}}, %{{.*}} {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x16x16xf32>
  %c = castor.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x16x16xf32>
  %g = castor.parameter "bn.weight" {init = #castor.init<ones>, trainable} : tensor<8xf32>
  %b = castor.parameter "bn.bias" {init = #castor.init<zeros>, trainable} : tensor<8xf32>
  // CHECK: castor.batch_norm_training %{{.*}} {epsilon = 1.000000e-03 : f64, momentum = 1.000000e-02 : f64} : (tensor<2x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>)
  %y, %mean, %istd = castor.batch_norm_training %c, %g, %b {epsilon = 1.0e-3 : f64, momentum = 1.0e-2 : f64} : (tensor<2x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: castor.relu %{{.*}} : tensor<2x8x16x16xf32>
  %r = castor.relu %y : tensor<2x8x16x16xf32>
  return %r : tensor<2x8x16x16xf32>
}

// -----

// CHECK-LABEL: func @grouped_dilated_conv_with_bias
func.func @grouped_dilated_conv_with_bias(%x: tensor<1x8x10x10xf16>, %w: tensor<8x2x3x3xf16>, %b: tensor<8xf16>) -> tensor<1x8x6x6xf16> {
  // CHECK: castor.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 2, 2>, groups = 4 : i64}
  %y = castor.conv2d %x, %w, %b {dilations = array<i64: 2, 2>, groups = 4 : i64} : (tensor<1x8x10x10xf16>, tensor<8x2x3x3xf16>, tensor<8xf16>) -> tensor<1x8x6x6xf16>
  return %y : tensor<1x8x6x6xf16>
}

// -----

// CHECK-LABEL: func @batch_norm_inference
func.func @batch_norm_inference(%x: tensor<4x6xbf16>, %p: tensor<6xf32>) -> tensor<4x6xbf16> {
  // CHECK: castor.batch_norm_inference %{{.*}} : (tensor<4x6xbf16>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<4x6xbf16>
  %y = castor.batch_norm_inference %x, %p, %p, %p, %p : (tensor<4x6xbf16>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<4x6xbf16>
  return %y : tensor<4x6xbf16>
}

// -----

// Mixed BatchNorm: f16 data, f32 scale, bias and statistics, in the forward and the backward.
// CHECK-LABEL: func @batch_norm_mixed
func.func @batch_norm_mixed(%x: tensor<2x8x4x4xf16>, %dy: tensor<2x8x4x4xf16>, %p: tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>) {
  // CHECK: castor.batch_norm_training %{{.*}} running(%{{.*}}, %{{.*}}) : (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
  %y, %mean, %istd = castor.batch_norm_training %x, %p, %p running(%p, %p) : (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: castor.batch_norm_training_backward %{{.*}} : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
  %dx, %dg, %db = castor.batch_norm_training_backward %dy, %x, %p, %mean, %istd : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
  return %dx, %dg, %db : tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// CHECK-LABEL: func @pools
func.func @pools(%x: tensor<1x4x7x7xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x3x3xf32>, tensor<1x4x1x1xf32>) {
  // CHECK: castor.max_pool2d %{{.*}} {ceil_mode = true, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x4x7x7xf32>) -> tensor<1x4x4x4xf32>
  %m = castor.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = true} : (tensor<1x4x7x7xf32>) -> tensor<1x4x4x4xf32>
  // CHECK: castor.avg_pool2d %{{.*}} {count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 3, 3>} : (tensor<1x4x7x7xf32>) -> tensor<1x4x3x3xf32>
  %a = castor.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = true} : (tensor<1x4x7x7xf32>) -> tensor<1x4x3x3xf32>
  // CHECK: castor.global_avg_pool %{{.*}} : (tensor<1x4x7x7xf32>) -> tensor<1x4x1x1xf32>
  %g = castor.global_avg_pool %x : (tensor<1x4x7x7xf32>) -> tensor<1x4x1x1xf32>
  return %m, %a, %g : tensor<1x4x4x4xf32>, tensor<1x4x3x3xf32>, tensor<1x4x1x1xf32>
}

// -----

// CHECK-LABEL: func @classifier
func.func @classifier(%x: tensor<2x16x1x1xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<2x10xf32>) {
  // CHECK: castor.flatten %{{.*}} : (tensor<2x16x1x1xf32>) -> tensor<2x16xf32>
  %f = castor.flatten %x : (tensor<2x16x1x1xf32>) -> tensor<2x16xf32>
  %w = castor.parameter "fc.weight" {init = #castor.init<linear_uniform>, trainable} : tensor<10x16xf32>
  %b = castor.parameter "fc.bias" {init = #castor.init<linear_uniform>, trainable} : tensor<10xf32>
  // CHECK: castor.gemm %{{.*}}, %{{.*}}, %{{.*}} {alpha = 5.000000e-01 : f64, trans_b = true} : (tensor<2x16xf32>, tensor<10x16xf32>, tensor<10xf32>) -> tensor<2x10xf32>
  %y = castor.gemm %f, %w, %b {trans_b = true, alpha = 0.5 : f64} : (tensor<2x16xf32>, tensor<10x16xf32>, tensor<10xf32>) -> tensor<2x10xf32>
  // CHECK: castor.softmax %{{.*}} {axis = 1 : i64} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  %p = castor.softmax %y {axis = 1 : i64} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  // CHECK: castor.softmax_cross_entropy %{{.*}}, %{{.*}} {label_smoothing = 1.000000e-01 : f64} : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
  %l = castor.softmax_cross_entropy %y, %labels {label_smoothing = 0.1 : f64} : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
  return %l, %p : tensor<f32>, tensor<2x10xf32>
}

// -----

// CHECK-LABEL: func @per_sample_loss
func.func @per_sample_loss(%y: tensor<3x5xf64>, %labels: tensor<3xi64>) -> tensor<3xf64> {
  // CHECK: castor.softmax_cross_entropy %{{.*}}, %{{.*}} {reduction = #castor.reduction<none>} : (tensor<3x5xf64>, tensor<3xi64>) -> tensor<3xf64>
  %l = castor.softmax_cross_entropy %y, %labels {reduction = #castor.reduction<none>} : (tensor<3x5xf64>, tensor<3xi64>) -> tensor<3xf64>
  return %l : tensor<3xf64>
}

// -----

// CHECK-LABEL: func @matmul_broadcast
func.func @matmul_broadcast(%a: tensor<4x8x16xf32>, %b: tensor<16x32xf32>, %v: tensor<32xf32>) -> tensor<4x8xf32> {
  // CHECK: castor.matmul %{{.*}}, %{{.*}} : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  %y = castor.matmul %a, %b : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  // CHECK: castor.matmul %{{.*}}, %{{.*}} : (tensor<4x8x32xf32>, tensor<32xf32>) -> tensor<4x8xf32>
  %z = castor.matmul %y, %v : (tensor<4x8x32xf32>, tensor<32xf32>) -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func @elementwise
func.func @elementwise(%a: tensor<2x3x4x4xf32>, %s: tensor<1x3x1x1xf32>) -> tensor<2x3x4x4xf32> {
  // CHECK: castor.add %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %0 = castor.add %a, %a : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.mul %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %1 = castor.mul %0, %s : (tensor<2x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.sigmoid %{{.*}} : tensor<2x3x4x4xf32>
  %2 = castor.sigmoid %1 : tensor<2x3x4x4xf32>
  // CHECK: castor.clip %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<2x3x4x4xf32>
  %3 = castor.clip %2 {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x3x4x4xf32>
  // CHECK: castor.clip %{{.*}} {min = -1.000000e+00 : f64} : tensor<2x3x4x4xf32>
  %4 = castor.clip %3 {min = -1.0 : f64} : tensor<2x3x4x4xf32>
  // CHECK: castor.dropout %{{.*}} {ratio = 2.000000e-01 : f64} : tensor<2x3x4x4xf32>
  %5 = castor.dropout %4 {ratio = 0.2 : f64} : tensor<2x3x4x4xf32>
  // ONNX's defaults are omitted; PyTorch's alpha is kept.
  // CHECK: castor.hard_sigmoid %{{.*}} : tensor<2x3x4x4xf32>
  %6 = castor.hard_sigmoid %5 : tensor<2x3x4x4xf32>
  // CHECK: castor.hard_sigmoid %{{.*}} {alpha = 0.16666666666666666 : f64} : tensor<2x3x4x4xf32>
  %7 = castor.hard_sigmoid %6 {alpha = 0.16666666666666666 : f64, beta = 0.5 : f64} : tensor<2x3x4x4xf32>
  // CHECK: castor.hard_swish %{{.*}} : tensor<2x3x4x4xf32>
  %8 = castor.hard_swish %7 : tensor<2x3x4x4xf32>
  // CHECK: castor.gelu %{{.*}} : tensor<2x3x4x4xf32>
  %9 = castor.gelu %8 : tensor<2x3x4x4xf32>
  // CHECK: castor.gelu %{{.*}} {tanh} : tensor<2x3x4x4xf32>
  %10 = castor.gelu %9 {tanh} : tensor<2x3x4x4xf32>
  // CHECK: castor.leaky_relu %{{.*}} {alpha = 2.000000e-01 : f64} : tensor<2x3x4x4xf32>
  %11 = castor.leaky_relu %10 {alpha = 0.2 : f64} : tensor<2x3x4x4xf32>
  // CHECK: castor.leaky_relu_backward %{{.*}}, %{{.*}} {alpha = 2.000000e-01 : f64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %12 = castor.leaky_relu_backward %11, %10 {alpha = 0.2 : f64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // The dialect's defaults (ONNX's) are omitted when printed.
  // CHECK: castor.elu %{{.*}} : tensor<2x3x4x4xf32>
  %13 = castor.elu %12 {alpha = 1.0 : f64} : tensor<2x3x4x4xf32>
  // CHECK: castor.elu_backward %{{.*}}, %{{.*}} {alpha = 5.000000e-01 : f64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %14 = castor.elu_backward %13, %12 {alpha = 0.5 : f64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.selu %{{.*}} {gamma = 2.000000e+00 : f64} : tensor<2x3x4x4xf32>
  %15 = castor.selu %14 {gamma = 2.0 : f64} : tensor<2x3x4x4xf32>
  // CHECK: castor.selu_backward %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %16 = castor.selu_backward %15, %14 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.celu %{{.*}} {alpha = 2.000000e+00 : f64} : tensor<2x3x4x4xf32>
  %17 = castor.celu %16 {alpha = 2.0 : f64} : tensor<2x3x4x4xf32>
  // CHECK: castor.celu_backward %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %18 = castor.celu_backward %17, %16 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.softplus %{{.*}} : tensor<2x3x4x4xf32>
  %19 = castor.softplus %18 : tensor<2x3x4x4xf32>
  // CHECK: castor.softplus_backward %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %20 = castor.softplus_backward %19, %18 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.mish %{{.*}} : tensor<2x3x4x4xf32>
  %21 = castor.mish %20 : tensor<2x3x4x4xf32>
  // CHECK: castor.mish_backward %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %22 = castor.mish_backward %21, %20 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.softsign %{{.*}} : tensor<2x3x4x4xf32>
  %23 = castor.softsign %22 : tensor<2x3x4x4xf32>
  // CHECK: castor.softsign_backward %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %24 = castor.softsign_backward %23, %22 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.sqrt %{{.*}} : tensor<2x3x4x4xf32>
  %25 = castor.sqrt %24 : tensor<2x3x4x4xf32>
  // CHECK: castor.sqrt_backward %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %26 = castor.sqrt_backward %25, %24 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: castor.reciprocal %{{.*}} : tensor<2x3x4x4xf32>
  %27 = castor.reciprocal %26 : tensor<2x3x4x4xf32>
  // CHECK: castor.reciprocal_backward %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %28 = castor.reciprocal_backward %27, %26 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %28 : tensor<2x3x4x4xf32>
}

// -----

// CHECK-LABEL: func @data_movement
func.func @data_movement(%a: tensor<1x4x2x2xf32>, %b: tensor<1x2x2x2xf32>) -> (tensor<6x4xf32>, tensor<1x6x2x2xf16>, tensor<1x4x2x2xf32>) {
  // CHECK: castor.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<1x4x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x6x2x2xf32>
  %c = castor.concat %a, %b {axis = 1 : i64} : (tensor<1x4x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x6x2x2xf32>
  // CHECK: castor.reshape %{{.*}} : tensor<1x6x2x2xf32> to tensor<6x4xf32>
  %r = castor.reshape %c : tensor<1x6x2x2xf32> to tensor<6x4xf32>
  // CHECK: castor.cast %{{.*}} : tensor<1x6x2x2xf32> to tensor<1x6x2x2xf16>
  %h = castor.cast %c : tensor<1x6x2x2xf32> to tensor<1x6x2x2xf16>
  // CHECK: castor.identity %{{.*}} : tensor<1x4x2x2xf32>
  %i = castor.identity %a : tensor<1x4x2x2xf32>
  return %r, %h, %i : tensor<6x4xf32>, tensor<1x6x2x2xf16>, tensor<1x4x2x2xf32>
}

// -----

// CHECK-LABEL: func @sources
func.func @sources() -> (tensor<2xf32>, tensor<3xi64>, tensor<4xf32>) {
  // CHECK: castor.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %c = castor.constant dense<[1.0, 2.0]> : tensor<2xf32>
  // CHECK: castor.parameter "steps" : tensor<3xi64>
  %s = castor.parameter "steps" : tensor<3xi64>
  // CHECK: castor.parameter "bn.running_var" {init = #castor.init<ones>} : tensor<4xf32>
  %v = castor.parameter "bn.running_var" {init = #castor.init<ones>} : tensor<4xf32>
  return %c, %s, %v : tensor<2xf32>, tensor<3xi64>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func @batch_norm_apply
func.func @batch_norm_apply(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %m: tensor<4xf32>,
                            %s: tensor<4xf32>, %z: tensor<2x4x3x3xf16>)
    -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  // CHECK: castor.batch_norm_apply %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
  %y = castor.batch_norm_apply %x, %g, %b, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf16>
  // CHECK: castor.batch_norm_apply %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} residual(%{{.*}}) {relu = true}
  %r = castor.batch_norm_apply %x, %g, %b, %m, %s residual(%z) {relu = true}
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>)
      -> tensor<2x4x3x3xf16>
  // CHECK: castor.batch_norm_apply %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {clip_max = 6.000000e+00 : f64, relu = true}
  %c = castor.batch_norm_apply %x, %g, %b, %m, %s {relu = true, clip_max = 6.0 : f64}
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf16>
  return %y, %r, %c : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}

// -----

// CHECK-LABEL: func @fused_batch_norm_relu
func.func @fused_batch_norm_relu(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %z: tensor<2x4x3x3xf16>)
    -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>) {
  // CHECK: castor.batch_norm_relu_training %{{.*}}, %{{.*}}, %{{.*}} residual(%{{.*}})
  %y, %m, %s = castor.batch_norm_relu_training %x, %g, %b residual(%z)
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: castor.batch_norm_relu_training_backward
  %dx, %dg, %db, %dz = castor.batch_norm_relu_training_backward %z, %x, %y, %g, %b, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
         tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>)
  return %dx, %dg, %db, %dz : tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>
}

// -----

// CHECK-LABEL: func @transpose_slice
func.func @transpose_slice(%x: tensor<2x6x4x5xf32>) -> (tensor<2x4x5x6xf32>, tensor<2x3x4x5xf32>, tensor<2x6x4x5xf32>) {
  // CHECK: castor.transpose %{{.*}} {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x6x4x5xf32>) -> tensor<2x4x5x6xf32>
  %t = castor.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x6x4x5xf32>) -> tensor<2x4x5x6xf32>
  // CHECK: castor.slice %{{.*}} {ends = array<i64: 2, -7, 4, 5>, starts = array<i64: 0, -1, 0, 0>, steps = array<i64: 1, -2, 1, 1>}
  %s = castor.slice %x {starts = array<i64: 0, -1, 0, 0>, ends = array<i64: 2, -7, 4, 5>, steps = array<i64: 1, -2, 1, 1>}
      : (tensor<2x6x4x5xf32>) -> tensor<2x3x4x5xf32>
  // CHECK: castor.slice_backward
  %d = castor.slice_backward %s {starts = array<i64: 0, -1, 0, 0>, ends = array<i64: 2, -7, 4, 5>, steps = array<i64: 1, -2, 1, 1>}
      : (tensor<2x3x4x5xf32>) -> tensor<2x6x4x5xf32>
  return %t, %s, %d : tensor<2x4x5x6xf32>, tensor<2x3x4x5xf32>, tensor<2x6x4x5xf32>
}

// -----

// CHECK-LABEL: func.func @fused_elementwise
// CHECK: castor.fused_elementwise(%arg0, %arg1) {program = "t0 = sigmoid(i0) : f16\0At1 = mul(i0, t0) : f16\0At2 = mul(t1, i1) : f16\0Aout t1, t2\0A"}
func.func @fused_elementwise(%x: tensor<2x8x4x4xf16>, %s: tensor<2x8x1x1xf16>) -> (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) {
  %y:2 = castor.fused_elementwise(%x, %s) {program = "t0 = sigmoid(i0) : f16\nt1 = mul(i0, t0) : f16\nt2 = mul(t1, i1) : f16\nout t1, t2\n"} : (tensor<2x8x4x4xf16>, tensor<2x8x1x1xf16>) -> (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>)
  return %y#0, %y#1 : tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>
}
