// RUN: castor-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(castor-select-kernels))' -verify-diagnostics | FileCheck %s

// Every op that executes names its runtime kernel; parameters and constants are sources.
// CHECK-LABEL: func @block
func.func @block(%x: tensor<2x3x8x8xf32>) -> tensor<2x4xf32> {
  // CHECK: castor.parameter "w"
  // CHECK-NOT: castor.kernel
  %w = castor.parameter "w" {trainable} : tensor<4x3x3x3xf32>
  // CHECK: castor.conv2d {{.*}}castor.kernel = "conv2d"
  %c = castor.conv2d %x, %w : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  // CHECK: castor.relu {{.*}}castor.kernel = "relu"
  %r = castor.relu %c : tensor<2x4x6x6xf32>
  // CHECK: castor.global_avg_pool {{.*}}castor.kernel = "global_avg_pool"
  %g = castor.global_avg_pool %r : (tensor<2x4x6x6xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: castor.reshape {{.*}}castor.kernel = "reshape"
  %f = castor.reshape %g : tensor<2x4x1x1xf32> to tensor<2x4xf32>
  return %f : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func @passthrough
// CHECK: %[[C:.*]] = castor.identity %arg0 {castor.kernel = "identity"}
// CHECK: return %[[C]]
func.func @passthrough(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func private @elsewhere(tensor<4xf32>) -> tensor<4xf32>

func.func @foreign(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{no runtime kernel computes 'func.call'}}
  %y = func.call @elsewhere(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
