// RUN: castor-opt %s -split-input-file -castor-batch-norm-form="form=as-exported" -verify-diagnostics
// RUN: castor-opt %s -split-input-file -castor-batch-norm-form="form=train" -verify-diagnostics

// An exporter merged equal initializers: the running mean is the trainable bias, which the
// step would both update and read as a statistic.
func.func @forward(%x: tensor<2x4xf32> {castor.name = "input"}) -> (tensor<2x4xf32> {castor.name = "output"}) {
  %g = castor.parameter "bn.weight" {trainable} : tensor<4xf32>
  %b = castor.parameter "bn.bias" {trainable} : tensor<4xf32>
  // expected-error@+1 {{reads running statistics from the trainable parameter 'bn.bias'}}
  %y = castor.batch_norm_inference %x, %g, %b, %b, %g : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
