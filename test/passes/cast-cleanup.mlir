// RUN: castor-opt %s -split-input-file -castor-cast-cleanup | FileCheck %s

// A widening round trip preserves values: f16 -> f32 -> f16 is the identity.
// CHECK-LABEL: func @widen_then_narrow
// CHECK-NOT: castor.cast
// CHECK: return %arg0
func.func @widen_then_narrow(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = castor.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = castor.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// f32 -> f16 rounds: the pair must stay.
// CHECK-LABEL: func @narrow_then_widen
// CHECK: %[[H:.*]] = castor.cast %arg0 : tensor<4xf32> to tensor<4xf16>
// CHECK: %[[F:.*]] = castor.cast %[[H]] : tensor<4xf16> to tensor<4xf32>
// CHECK: return %[[F]]
func.func @narrow_then_widen(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = castor.cast %x : tensor<4xf32> to tensor<4xf16>
  %1 = castor.cast %0 : tensor<4xf16> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// bf16 -> f32 is exact, so bf16 -> f32 -> f16 is one cast bf16 -> f16.
// CHECK-LABEL: func @exact_then_other
// CHECK: %[[C:.*]] = castor.cast %arg0 : tensor<4xbf16> to tensor<4xf16>
// CHECK-NEXT: return %[[C]]
func.func @exact_then_other(%x: tensor<4xbf16>) -> tensor<4xf16> {
  %0 = castor.cast %x : tensor<4xbf16> to tensor<4xf32>
  %1 = castor.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// f16 and bf16 each lack values of the other: f16 -> bf16 -> f16 stays.
// CHECK-LABEL: func @half_formats
// CHECK-COUNT-2: castor.cast
func.func @half_formats(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = castor.cast %x : tensor<4xf16> to tensor<4xbf16>
  %1 = castor.cast %0 : tensor<4xbf16> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// i64 -> f32 rounds large integers: stays.
// CHECK-LABEL: func @integer_to_float
// CHECK-COUNT-2: castor.cast
func.func @integer_to_float(%x: tensor<4xi64>) -> tensor<4xi64> {
  %0 = castor.cast %x : tensor<4xi64> to tensor<4xf32>
  %1 = castor.cast %0 : tensor<4xf32> to tensor<4xi64>
  return %1 : tensor<4xi64>
}

// -----

// A cast to the same type folds.
// CHECK-LABEL: func @same_type
// CHECK-NOT: castor.cast
func.func @same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = castor.cast %x : tensor<4xf32> to tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A cast of a constant is the constant in the cast's type, rounded to nearest-even (0.1 in f16
// is 0.0999755859375, 1.0 exactly 1.0).
// CHECK-LABEL: func.func @constant
// CHECK-NOT: castor.cast
// CHECK: castor.constant dense<[9.997550e-02, 1.000000e+00]> : tensor<2xf16>
func.func @constant() -> tensor<2xf16> {
  %c = castor.constant dense<[0.1, 1.0]> : tensor<2xf32>
  %h = castor.cast %c : tensor<2xf32> to tensor<2xf16>
  return %h : tensor<2xf16>
}
