// RUN: castor-opt %s -split-input-file -castor-recompute="policy=auto memory-budget=100" -verify-diagnostics

// No schedule fits: the error names the smallest planned peak the pass reached.
// expected-error@+1 {{no recompute schedule fits the memory budget of 100 bytes: the smallest planned peak is}}
func.func @too_small(%x: tensor<2x4x3x3xf16>, %logits: tensor<2x4xf32>, %labels: tensor<2xi64>,
                     %dy: tensor<2x4x3x3xf16>) -> (tensor<f32>, tensor<2x4x3x3xf16>) {
  %r = castor.relu %x : tensor<2x4x3x3xf16>
  %loss = castor.softmax_cross_entropy %logits, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  %d = castor.relu_backward %dy, %r : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  return %loss, %d : tensor<f32>, tensor<2x4x3x3xf16>
}

// -----

// Only a training step (a loss, then its backward) has values to recompute.
// expected-error@+1 {{recompute needs a training step (no loss in 'forward')}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %r = castor.relu %x : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
