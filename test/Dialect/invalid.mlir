// RUN: castor-opt %s -split-input-file -verify-diagnostics

func.func @conv_channel_mismatch(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{filter [4, 2, 3, 3] expects 2 input channels, input [1, 3, 8, 8] has 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_wrong_result(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<1x4x6x6xf32>' are incompatible with return type(s) of operation 'tensor<1x4x8x8xf32>'}}
  %y = castor.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x6x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{must be divisible by groups 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.conv2d %x, %w {groups = 4 : i64} : (tensor<1x6x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_bad_bias(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{bias must be [4], got [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.conv2d %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_mixed_types(%x: tensor<1x3x8x8xf16>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{input, filter and bias must share one element type, got 'f16' and 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.conv2d %x, %w : (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf16>
  return
}

// -----

func.func @conv_kernel_too_large(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{does not fit the padded input}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.conv2d %x, %w : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

func.func @conv_bad_strides(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{strides must have 2 values, got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.conv2d %x, %w {strides = array<i64: 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_dynamic(%x: tensor<?x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %y = castor.conv2d %x, %w : (tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x6x6xf32>
  return
}

// -----

func.func @conv_integer(%x: tensor<1x3x8x8xi64>, %w: tensor<4x3x3x3xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %y = castor.conv2d %x, %w : (tensor<1x3x8x8xi64>, tensor<4x3x3x3xi64>) -> tensor<1x4x6x6xi64>
  return
}

// -----

func.func @bn_channels(%x: tensor<2x8x4x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+2 {{per-channel operands must be [8], got [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %m, %s = castor.batch_norm_training %x, %g, %g : (tensor<2x8x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x8x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @bn_stats_type(%x: tensor<2x8x4x4xf16>, %g: tensor<8xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<2x8x4x4xf16>', 'tensor<8xf32>', 'tensor<8xf32>' are incompatible with return type(s) of operation 'tensor<2x8x4x4xf16>', 'tensor<8xf16>', 'tensor<8xf16>'}}
  %y, %m, %s = castor.batch_norm_training %x, %g, %g : (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf16>, tensor<8xf16>)
  return
}

// -----

func.func @bn_inference_rank(%x: tensor<8xf32>, %p: tensor<8xf32>) {
  // expected-error @+2 {{input must have rank >= 2 [N, C, ...], got [8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.batch_norm_inference %x, %p, %p, %p, %p : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @bn_inference_mixed(%x: tensor<2x8xf32>, %p: tensor<8xf32>, %q: tensor<8xf16>) {
  // expected-error @+2 {{scale, bias, statistics and their gradients must share one element type, got f32 and f16}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.batch_norm_inference %x, %p, %p, %p, %q : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf16>) -> tensor<2x8xf32>
  return
}

// -----

// Low-precision data mixes with f32 parameters only.
func.func @bn_f16_data_bf16_params(%x: tensor<2x8x4x4xf16>, %g: tensor<8xbf16>) {
  // expected-error @+2 {{scale, bias and statistics of f16 data must be f32 or f16, got bf16}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %m, %s = castor.batch_norm_training %x, %g, %g : (tensor<2x8x4x4xf16>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x8x4x4xf16>, tensor<8xbf16>, tensor<8xbf16>)
  return
}

// -----

// f32 data does not take wider parameters.
func.func @bn_f32_data_f64_params(%x: tensor<2x8xf32>, %p: tensor<8xf64>) {
  // expected-error @+2 {{scale, bias and statistics of f32 data must be f32, got f64}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.batch_norm_inference %x, %p, %p, %p, %p : (tensor<2x8xf32>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>) -> tensor<2x8xf32>
  return
}

// -----

func.func @bn_backward_dy_type(%dy: tensor<2x8x4x4xf32>, %x: tensor<2x8x4x4xf16>, %p: tensor<8xf32>) {
  // expected-error @+2 {{x, y, dy and dx must share one element type, got f32 and f16}}
  // expected-error @+1 {{failed to infer returned types}}
  %dx, %dg, %db = castor.batch_norm_training_backward %dy, %x, %p, %p, %p : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @bn_running_update_types(%p: tensor<8xf32>, %q: tensor<8xf16>) {
  // expected-error @+1 {{scale, bias, statistics and their gradients must share one element type, got f32 and f16}}
  %rm, %rv = castor.batch_norm_running_update %p, %p, %q, %q {count = 8 : i64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf16>, tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @max_pool_pad(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{pads [2, 2, 2, 2] must be smaller than the kernel [2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.max_pool2d %x {kernel = array<i64: 2, 2>, pads = array<i64: 2, 2, 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x11x11xf32>
  return
}

// -----

func.func @max_pool_missing_kernel(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{requires attribute 'kernel'}}
  %y = castor.max_pool2d %x : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @avg_pool_rank(%x: tensor<4x8x8xf32>) {
  // expected-error @+2 {{input must be rank 4 [N, C, H, W], got [4, 8, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.avg_pool2d %x {kernel = array<i64: 2, 2>} : (tensor<4x8x8xf32>) -> tensor<4x4x4xf32>
  return
}

// -----

func.func @avg_pool_zero_stride(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{kernel, strides and dilations must be positive, got [0, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 0, 1>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @global_pool_rank(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{input must have rank >= 3 [N, C, d...], got [4, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.global_avg_pool %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @gemm_inner(%a: tensor<2x16xf32>, %b: tensor<10x15xf32>) {
  // expected-error @+2 {{inner dimensions differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.gemm %a, %b {trans_b = true} : (tensor<2x16xf32>, tensor<10x15xf32>) -> tensor<2x10xf32>
  return
}

// -----

func.func @gemm_bias(%a: tensor<2x16xf32>, %b: tensor<10x16xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{C [3] does not broadcast to [2, 10]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.gemm %a, %b, %c {trans_b = true} : (tensor<2x16xf32>, tensor<10x16xf32>, tensor<3xf32>) -> tensor<2x10xf32>
  return
}

// -----

func.func @matmul_inner(%a: tensor<4x8xf32>, %b: tensor<9x2xf32>) {
  // expected-error @+2 {{inner dimensions differ: [4, 8] x [9, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.matmul %a, %b : (tensor<4x8xf32>, tensor<9x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x10xf32>) {
  // expected-error @+2 {{axis 2 out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.softmax %x {axis = 2 : i64} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  return
}

// -----

func.func @sce_labels(%y: tensor<2x10xf32>, %l: tensor<3xi64>) {
  // expected-error @+2 {{labels must be [2], got [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %loss = castor.softmax_cross_entropy %y, %l : (tensor<2x10xf32>, tensor<3xi64>) -> tensor<f32>
  return
}

// -----

func.func @sce_label_type(%y: tensor<2x10xf32>, %l: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 64-bit signless integer values}}
  %loss = castor.softmax_cross_entropy %y, %l : (tensor<2x10xf32>, tensor<2xf32>) -> tensor<f32>
  return
}

// -----

func.func @sce_smoothing(%y: tensor<2x10xf32>, %l: tensor<2xi64>) {
  // expected-error @+2 {{label_smoothing must be in [0, 1], got 1.5}}
  // expected-error @+1 {{failed to infer returned types}}
  %loss = castor.softmax_cross_entropy %y, %l {label_smoothing = 1.5 : f64} : (tensor<2x10xf32>, tensor<2xi64>) -> tensor<f32>
  return
}

// -----

func.func @add_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{shapes [2, 3] and [4] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @mul_types(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+2 {{operands must share one element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.mul %a, %b : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @relu_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "castor.relu"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @sigmoid_int(%a: tensor<2x3xi64>) {
  // expected-error @+1 {{must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %y = castor.sigmoid %a : tensor<2x3xi64>
  return
}

// -----

func.func @clip_bounds(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{min 6.000000e+00 is greater than max 0.000000e+00}}
  %y = castor.clip %a {min = 6.0 : f64, max = 0.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @celu_zero_alpha(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{alpha must be non-zero}}
  %y = castor.celu %a {alpha = 0.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @flatten_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis must be in [-rank, rank], got 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.flatten %a {axis = 5 : i64} : (tensor<2x3xf32>) -> tensor<6x1xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape [2, 3] (6 elements) to [7] (7 elements)}}
  %y = castor.reshape %a : tensor<2x3xf32> to tensor<7xf32>
  return
}

// -----

func.func @reshape_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{must keep the element type}}
  %y = castor.reshape %a : tensor<2x3xf32> to tensor<6xf16>
  return
}

// -----

func.func @concat_mismatch(%a: tensor<1x4x2x2xf32>, %b: tensor<1x2x3x2xf32>) {
  // expected-error @+2 {{inputs differ outside the concatenation axis}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.concat %a, %b {axis = 1 : i64} : (tensor<1x4x2x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x6x2x2xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<1x4xf32>) {
  // expected-error @+2 {{axis -3 out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.concat %a, %a {axis = -3 : i64} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dropout_ratio(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{ratio must be in [0, 1), got 1}}
  %y = castor.dropout %a {ratio = 1.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %y = castor.cast %a : tensor<2x3xf32> to tensor<3x2xf16>
  return
}

// -----

func.func @cast_unsupported(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 64-bit signless integer values}}
  %y = castor.cast %a : tensor<2x3xf32> to tensor<2x3xi32>
  return
}

// -----

func.func @identity_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "castor.identity"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf64>
  return
}

// -----

func.func @parameter_name() {
  // expected-error @+1 {{needs a non-empty name}}
  %p = castor.parameter "" : tensor<2xf32>
  return
}

// -----

func.func @parameter_trainable_int() {
  // expected-error @+1 {{a trainable parameter must have a floating-point element type, got 'i64'}}
  %p = castor.parameter "step" {trainable} : tensor<1xi64>
  return
}

// -----

func.func @parameter_bad_init() {
  // expected-error @+2 {{failed to parse Castor_InitAttr parameter}}
  // expected-error @+1 {{expected ::castor::Init to be one of: file, kaiming_normal, linear_uniform, zeros, ones}}
  %p = castor.parameter "w" {init = #castor.init<xavier>} : tensor<2xf32>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{failed to verify that all of {value, output} have same type}}
  %c = "castor.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @apply_statistics_shape(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %m: tensor<3xf32>,
                                  %s: tensor<4xf32>) {
  // expected-error @+2 {{per-channel operands must be [4], got [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.batch_norm_apply %x, %g, %b, %m, %s
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf16>
  return
}

// -----

func.func @apply_clip_without_relu(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>) {
  // expected-error @+1 {{clip_max needs relu}}
  %y = castor.batch_norm_apply %x, %g, %g, %g, %g {clip_max = 6.0 : f64}
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf16>
  return
}

// -----

func.func @apply_clip_with_residual(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>) {
  // expected-error @+1 {{clip_max takes no residual}}
  %y = castor.batch_norm_apply %x, %g, %g, %g, %g residual(%x) {relu = true, clip_max = 6.0 : f64}
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>)
      -> tensor<2x4x3x3xf16>
  return
}

// -----

func.func @fused_residual_type(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %z: tensor<2x4x3x3xf32>) {
  // expected-error @+2 {{residual must have the input's type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %m, %s = castor.batch_norm_relu_training %x, %g, %b residual(%z)
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf32>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @fused_backward_gradient_type(%dy: tensor<2x4x3x3xf16>, %x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>) {
  // expected-error @+1 {{output_grad, output and the data gradients must have the input's type}}
  %dx, %dg, %db = castor.batch_norm_relu_training_backward %dy, %x, %x, %g, %g, %g, %g
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
         tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @fused_clip_with_residual(%x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>, %b: tensor<4xf32>, %z: tensor<2x4x3x3xf16>) {
  // expected-error @+1 {{clip_max takes no residual}}
  %y, %m, %s = castor.batch_norm_relu_training %x, %g, %b residual(%z) {clip_max = 6.0 : f64}
      : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf16>)
      -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @fused_clip_not_positive(%dy: tensor<2x4x3x3xf16>, %x: tensor<2x4x3x3xf16>, %g: tensor<4xf32>) {
  // expected-error @+1 {{clip_max must be positive and finite}}
  %dx, %dg, %db = castor.batch_norm_relu_training_backward %dy, %x, %x, %g, %g, %g, %g {clip_max = 0.0 : f64}
      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
         tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{perm [0, 1, 1] is not a permutation of the input's dimensions}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.transpose %x {perm = array<i64: 0, 1, 1>} : (tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{step of dimension 1 is 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = castor.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_backward_shape(%dy: tensor<2x2xf32>) {
  // expected-error @+1 {{output_grad has shape [2, 2], the forward rule gives [2, 3]}}
  %dx = castor.slice_backward %dy {starts = array<i64: 0, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @fused_elementwise_bad_program(%x: tensor<2x8xf16>) {
  // expected-error @+1 {{program line 1 "t0 = conv2d(i0) : f16": 'conv2d' cannot stand in a fused element-wise program}}
  %y = castor.fused_elementwise(%x) {program = "t0 = conv2d(i0) : f16\nout t0\n"} : (tensor<2x8xf16>) -> tensor<2x8xf16>
  return
}

// -----

func.func @fused_elementwise_operand_type(%x: tensor<2x8xf16>) {
  // expected-error @+1 {{program line 1 "t0 = sigmoid(i0) : f32": i0 is f16 where sigmoid gives f32}}
  %y = castor.fused_elementwise(%x) {program = "t0 = sigmoid(i0) : f32\nout t0\n"} : (tensor<2x8xf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @fused_elementwise_attribute(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{program line 1 "t0 = hard_sigmoid(i0) {slope=2} : f32": hard_sigmoid: unknown attribute 'slope' for hard_sigmoid (it takes: alpha, beta)}}
  %y = castor.fused_elementwise(%x) {program = "t0 = hard_sigmoid(i0) {slope=2} : f32\nout t0\n"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @fused_elementwise_undefined(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{program line 1 "t0 = add(i0, t1) : f32": operand 1 is not an input or an earlier value}}
  %y = castor.fused_elementwise(%x) {program = "t0 = add(i0, t1) : f32\nout t0\n"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @fused_elementwise_output_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{output 0 is f16 but t0 is f32}}
  %y = castor.fused_elementwise(%x) {program = "t0 = relu(i0) : f32\nout t0\n"} : (tensor<2x8xf32>) -> tensor<2x8xf16>
  return
}

// -----

func.func @fused_elementwise_domain(%x: tensor<2x8xf32>, %v: tensor<3xf32>) {
  // expected-error @+1 {{input 1 [3] does not broadcast to the domain [2, 8]}}
  %y = castor.fused_elementwise(%x, %v) {program = "t0 = add(i0, i1) : f32\nout t0\n"} : (tensor<2x8xf32>, tensor<3xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @fused_elementwise_no_out(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{a program needs at least one instruction and an out line}}
  %y = castor.fused_elementwise(%x) {program = "t0 = relu(i0) : f32\n"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}
