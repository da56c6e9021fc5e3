// RUN: castor-opt %s -split-input-file -castor-fuse-elementwise | FileCheck %s
// RUN: castor-opt %s -split-input-file -castor-fuse-elementwise="max-inputs=2" | FileCheck %s --check-prefix=LIMIT

// SiLU: sigmoid then mul, one kernel; the sigmoid's output is also returned (its backward reads it).
// CHECK-LABEL: func.func @silu
// CHECK-NEXT: %[[F:.*]]:2 = castor.fused_elementwise(%arg0) {program = "t0 = sigmoid(i0) : f16\0At1 = mul(i0, t0) : f16\0Aout t0, t1\0A"} : (tensor<2x8x4x4xf16>) -> (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>)
// CHECK-NEXT: return %[[F]]#1, %[[F]]#0
func.func @silu(%x: tensor<2x8x4x4xf16>) -> (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) {
  %s = castor.sigmoid %x : tensor<2x8x4x4xf16>
  %y = castor.mul %x, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  return %y, %s : tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>
}

// -----

// SiLU's gradient: dy s + sigmoid_backward(dy x, s), one kernel, intermediates never stored.
// CHECK-LABEL: func.func @silu_backward
// CHECK-NEXT: %[[F:.*]] = castor.fused_elementwise(%arg0, %arg2, %arg1) {program = "t0 = mul(i0, i1) : f16\0At1 = mul(i0, i2) : f16\0At2 = sigmoid_backward(t1, i1) : f16\0At3 = add(t0, t2) : f16\0Aout t3\0A"}
// CHECK-NEXT: return %[[F]]
// A group may read at most max-inputs tensors: with two, every merge here reads three.
// LIMIT-LABEL: func.func @silu_backward
// LIMIT-NOT: fused_elementwise
// LIMIT: return
func.func @silu_backward(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf16>, %s: tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16> {
  %a = castor.mul %dy, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %b = castor.mul %dy, %x : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %c = castor.sigmoid_backward %b, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %d = castor.add %a, %c : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  return %d : tensor<2x8x4x4xf16>
}

// -----

// A squeeze-excitation scale [N,C,1,1] and a per-channel bias [1,C,1,1] broadcast into the group.
// CHECK-LABEL: func.func @broadcasts
// CHECK-NEXT: castor.fused_elementwise(%arg0, %arg1, %arg2) {program = "t0 = mul(i0, i1) : f32\0At1 = add(t0, i2) : f32\0At2 = relu(t1) : f32\0Aout t2\0A"} : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x4x4xf32>
func.func @broadcasts(%x: tensor<2x8x4x4xf32>, %s: tensor<2x8x1x1xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<2x8x4x4xf32> {
  %m = castor.mul %x, %s : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %a = castor.add %m, %b : (tensor<2x8x4x4xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %r = castor.relu %a : tensor<2x8x4x4xf32>
  return %r : tensor<2x8x4x4xf32>
}

// -----

// The squeeze-excitation block: its pool joins the group as a reduction output, but its scale
// is computed from that output, so the product with it cannot join the group (a value needed by
// two groups across a reduction); it starts another.
// CHECK-LABEL: func.func @across_reduction
// CHECK-NEXT: %[[A:.*]]:2 = castor.fused_elementwise(%arg0) {program = "t0 = sigmoid(i0) : f32\0At1 = mul(i0, t0) : f32\0Aout t1, mean(t1)[2,3]\0A"}
// CHECK-NEXT: %[[G:.*]] = castor.sigmoid %[[A]]#1
// CHECK-NEXT: castor.fused_elementwise(%[[A]]#0, %[[G]], %arg0) {program = "t0 = mul(i0, i1) : f32\0At1 = add(t0, i2) : f32\0Aout t1\0A"}
func.func @across_reduction(%x: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %s = castor.sigmoid %x : tensor<2x8x4x4xf32>
  %y = castor.mul %x, %s : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %p = castor.global_avg_pool %y : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %g = castor.sigmoid %p : tensor<2x8x1x1xf32>
  %z = castor.mul %y, %g : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %o = castor.add %z, %x : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %o : tensor<2x8x4x4xf32>
}

// -----

// A forward op and the backward op reading its output: the forward's other reader comes
// before the backward's gradient is ready, so they stay apart; the recomputed sigmoid fuses
// with the backward instead.
// CHECK-LABEL: func.func @forward_and_backward
// CHECK-NEXT: %[[F:.*]]:2 = castor.fused_elementwise(%arg0) {program = "t0 = sigmoid(i0) : f16\0At1 = mul(i0, t0) : f16\0Aout t0, t1\0A"}
// CHECK-NEXT: %[[C:.*]] = castor.conv2d %[[F]]#1
// CHECK-NEXT: %[[D:.*]] = castor.conv2d_backward_data %[[C]]
// CHECK-NEXT: castor.fused_elementwise(%arg0, %[[D]], %[[F]]#0) {program = "t0 = sigmoid(i0) : f16\0At1 = mul(i1, i0) : f16\0At2 = sigmoid_backward(t1, t0) : f16\0At3 = sigmoid_backward(t2, i2) : f16\0Aout t3\0A"}
// CHECK-NOT: castor.sigmoid
func.func @forward_and_backward(%x: tensor<2x8x4x4xf16>, %w: tensor<8x8x1x1xf16>) -> (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) {
  %s = castor.sigmoid %x : tensor<2x8x4x4xf16>
  %y = castor.mul %x, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %c = castor.conv2d %y, %w : (tensor<2x8x4x4xf16>, tensor<8x8x1x1xf16>) -> tensor<2x8x4x4xf16>
  %dy = castor.conv2d_backward_data %c, %w : (tensor<2x8x4x4xf16>, tensor<8x8x1x1xf16>) -> tensor<2x8x4x4xf16>
  %s2 = castor.sigmoid %x {castor.recomputed} : tensor<2x8x4x4xf16>
  %b = castor.mul %dy, %x : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %d = castor.sigmoid_backward %b, %s2 : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %e = castor.sigmoid_backward %d, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  return %c, %e : tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>
}

// -----

// A layer the precision policy keeps in f32 inside an f16 chain: each op keeps its type.
// CHECK-LABEL: func.func @fp32_layer
// CHECK-NEXT: castor.fused_elementwise(%arg0) {program = "t0 = cast(i0) : f32\0At1 = gelu(t0) {tanh=true} : f32\0At2 = cast(t1) : f16\0At3 = clip(t2) {max=6, min=0} : f16\0Aout t3\0A"} : (tensor<2x8xf16>) -> tensor<2x8xf16>
func.func @fp32_layer(%x: tensor<2x8xf16>) -> tensor<2x8xf16> {
  %a = castor.cast %x : tensor<2x8xf16> to tensor<2x8xf32>
  %b = castor.gelu %a {tanh} : tensor<2x8xf32>
  %c = castor.cast %b : tensor<2x8xf32> to tensor<2x8xf16>
  %d = castor.clip %c {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x8xf16>
  return %d : tensor<2x8xf16>
}

// -----

// Ops of different shapes never share a group; a lone op stays as it is.
// CHECK-LABEL: func.func @lone_and_other_shapes
// CHECK-NOT: fused_elementwise
// CHECK: castor.relu %arg0
// CHECK-NEXT: castor.sigmoid %arg1
func.func @lone_and_other_shapes(%x: tensor<2x8xf32>, %v: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>) {
  %a = castor.relu %x : tensor<2x8xf32>
  %b = castor.sigmoid %v : tensor<8xf32>
  return %a, %b : tensor<2x8xf32>, tensor<8xf32>
}

// -----

// Layer scale's gradients: dy gamma is the data gradient, and the per-channel sum of (dy gamma) x
// (a gradient of a scale applied before it) joins the group that computes the product, which is
// never stored.
// CHECK-LABEL: func.func @layer_scale_backward
// CHECK-NEXT: %[[F:.*]]:2 = castor.fused_elementwise(%arg0, %arg2, %arg1) {program = "t0 = mul(i0, i1) : f16\0At1 = mul(t0, i2) : f16\0Aout t0, sum(t1)[0,2,3]\0A"} : (tensor<2x8x4x4xf16>, tensor<1x8x1x1xf16>, tensor<2x8x4x4xf16>) -> (tensor<2x8x4x4xf16>, tensor<1x8x1x1xf16>)
// CHECK-NEXT: return %[[F]]#0, %[[F]]#1
func.func @layer_scale_backward(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf16>, %g: tensor<1x8x1x1xf16>) -> (tensor<2x8x4x4xf16>, tensor<1x8x1x1xf16>) {
  %dx = castor.mul %dy, %g : (tensor<2x8x4x4xf16>, tensor<1x8x1x1xf16>) -> tensor<2x8x4x4xf16>
  %p = castor.mul %dx, %x : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %dg = castor.reduce_sum_to %p : (tensor<2x8x4x4xf16>) -> tensor<1x8x1x1xf16>
  return %dx, %dg : tensor<2x8x4x4xf16>, tensor<1x8x1x1xf16>
}

// -----

// A bias gradient without kept dims of 1 and a scale: the group writes the sum only.
// CHECK-LABEL: func.func @bias_gradient
// CHECK-NEXT: castor.fused_elementwise(%arg0, %arg1) {program = "t0 = mul(i0, i1) : f32\0Aout sum(t0)[0,2,3]{scale=0.5}\0A"} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<8x1x1xf32>
func.func @bias_gradient(%dy: tensor<2x8x4x4xf32>, %m: tensor<2x8x4x4xf32>) -> tensor<8x1x1xf32> {
  %p = castor.mul %dy, %m : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %db = castor.reduce_sum_to %p {scale = 0.5 : f64} : (tensor<2x8x4x4xf32>) -> tensor<8x1x1xf32>
  return %db : tensor<8x1x1xf32>
}

// -----

// A reduction's result read by an op that reads the group too: the reduction joins as an output,
// and the product, which needs the finished mean, stays out of the group (a reduction never
// feeds an op of its own group).
// CHECK-LABEL: func.func @read_inside
// CHECK-NEXT: %[[F:.*]]:2 = castor.fused_elementwise(%arg0) {program = "t0 = sigmoid(i0) : f32\0Aout t0, mean(t0)[2,3]\0A"}
// CHECK-NEXT: castor.mul %[[F]]#0, %[[F]]#1
func.func @read_inside(%x: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %s = castor.sigmoid %x : tensor<2x8x4x4xf32>
  %p = castor.global_avg_pool %s : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %y = castor.mul %s, %p : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  return %y : tensor<2x8x4x4xf32>
}

// -----

// An fp32-policy reduction of f16 data: the pool reads the f32 cast, which the group computes
// and never stores; the mean is f32 as the policy made it.
// CHECK-LABEL: func.func @fp32_reduction
// CHECK-NEXT: castor.fused_elementwise(%arg0) {program = "t0 = sigmoid(i0) : f16\0At1 = mul(i0, t0) : f16\0At2 = cast(t1) : f32\0Aout t1, mean(t2)[2,3]\0A"} : (tensor<2x8x4x4xf16>) -> (tensor<2x8x4x4xf16>, tensor<2x8x1x1xf32>)
func.func @fp32_reduction(%x: tensor<2x8x4x4xf16>) -> (tensor<2x8x4x4xf16>, tensor<2x8x1x1xf32>) {
  %s = castor.sigmoid %x : tensor<2x8x4x4xf16>
  %y = castor.mul %x, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  %c = castor.cast %y : tensor<2x8x4x4xf16> to tensor<2x8x4x4xf32>
  %p = castor.global_avg_pool %c : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  return %y, %p : tensor<2x8x4x4xf16>, tensor<2x8x1x1xf32>
}

// -----

// Two reductions of other axes (per channel and per sample and channel) never share a group:
// the second stays a kernel of its own.
// CHECK-LABEL: func.func @other_axes
// CHECK-NEXT: %[[F:.*]]:2 = castor.fused_elementwise(%arg0, %arg1) {program = "t0 = mul(i0, i1) : f32\0Aout t0, sum(t0)[0,2,3]\0A"}
// CHECK-NEXT: castor.global_avg_pool %[[F]]#0
func.func @other_axes(%a: tensor<2x8x4x4xf32>, %b: tensor<2x8x4x4xf32>) -> (tensor<1x8x1x1xf32>, tensor<2x8x1x1xf32>) {
  %p = castor.mul %a, %b : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %s = castor.reduce_sum_to %p : (tensor<2x8x4x4xf32>) -> tensor<1x8x1x1xf32>
  %m = castor.global_avg_pool %p : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  return %s, %m : tensor<1x8x1x1xf32>, tensor<2x8x1x1xf32>
}
