// RUN: castor-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(castor-select-kernels,castor-plan-memory))' | FileCheck %s
// RUN: castor-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(castor-select-kernels,castor-plan-memory{workspace-limit=1048576}))' | FileCheck --check-prefix=LIMIT %s

// A chain of 1 KiB tensors: a kernel's output reuses the bytes of a tensor that died at an
// earlier kernel, never those of its own operands. Parameters live for the whole step.
// CHECK-LABEL: func @chain
// CHECK-SAME: castor.arena_bytes = 3072 : i64
// CHECK-SAME: castor.input_offsets = array<i64: [[IN:[0-9]+]]>
// CHECK-SAME: castor.tensor_bytes = 6144 : i64
// Without workspace-limit no limit is recorded (the plan then has neither a limit nor a
// predicted peak); with one, the function carries it for the plan emitter.
// CHECK-NOT: castor.workspace_limit
// LIMIT-LABEL: func @chain
// LIMIT-SAME: castor.workspace_limit = 1048576 : i64
func.func @chain(%x: tensor<256xf32>) -> tensor<256xf32> {
  // CHECK: castor.parameter "b" {castor.offsets = array<i64: [[B:[0-9]+]]>
  %b = castor.parameter "b" {trainable} : tensor<256xf32>
  // CHECK: castor.add {{.*}}castor.offsets = array<i64: [[A1:[0-9]+]]>
  %1 = castor.add %x, %b : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  // CHECK: castor.relu {{.*}}castor.offsets = array<i64: [[IN]]>
  %2 = castor.relu %1 : tensor<256xf32>
  // CHECK: castor.add {{.*}}castor.offsets = array<i64: [[A1]]>
  %3 = castor.add %2, %b : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  // CHECK: castor.relu {{.*}}castor.offsets = array<i64: [[IN]]>
  %4 = castor.relu %3 : tensor<256xf32>
  return %4 : tensor<256xf32>
}

// -----

// Offsets are aligned: a 4-byte tensor still takes a 256-byte slot, and an unused result
// (the batch statistics) keeps its slot while its kernel runs.
// CHECK-LABEL: func @aligned
// CHECK-SAME: castor.arena_bytes = 1280 : i64
func.func @aligned(%x: tensor<2x1x1x1xf32>, %s: tensor<1xf32>) -> tensor<2x1x1x1xf32> {
  // CHECK: castor.batch_norm_training {{.*}}castor.offsets = array<i64: [[Y:[0-9]+]], {{[0-9]+}}, {{[0-9]+}}>
  %y, %m, %v = castor.batch_norm_training %x, %s, %s : (tensor<2x1x1x1xf32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<2x1x1x1xf32>, tensor<1xf32>, tensor<1xf32>)
  // CHECK: castor.relu {{.*}}castor.offsets = array<i64: 0>
  %r = castor.relu %y : tensor<2x1x1x1xf32>
  // CHECK: castor.relu {{.*}}castor.offsets = array<i64: [[Y]]>
  %z = castor.relu %r : tensor<2x1x1x1xf32>
  return %z : tensor<2x1x1x1xf32>
}
