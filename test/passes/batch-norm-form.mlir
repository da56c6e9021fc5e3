// RUN: castor-opt %s -split-input-file -castor-batch-norm-form="form=train" | FileCheck %s --check-prefix=TRAIN
// RUN: castor-opt %s -split-input-file -castor-batch-norm-form="form=frozen" | FileCheck %s --check-prefix=FROZEN
// RUN: castor-opt %s -split-input-file -castor-batch-norm-form="form=as-exported" | FileCheck %s --check-prefix=ASIS

// An eval-mode export's BatchNorm: trained on batch statistics (train), its mean and variance
// becoming running statistics; left as it is otherwise.
// TRAIN-LABEL: func.func @forward
// TRAIN-NOT: batch_norm_inference
// (PyTorch's momentum 0.1, the default, is not printed.)
// TRAIN: castor.batch_norm_training %arg0, %{{.*}}, %{{.*}} running(%{{.*}}, %{{.*}}) {epsilon = 1.000000e-03 : f64} :
// FROZEN-LABEL: func.func @forward
// FROZEN: castor.batch_norm_inference %arg0, {{.*}} {epsilon = 1.000000e-03 : f64}
// ASIS-LABEL: func.func @forward
// ASIS: castor.batch_norm_inference %arg0, {{.*}} {epsilon = 1.000000e-03 : f64}
func.func @forward(%x: tensor<2x4x3x3xf32> {castor.name = "input"}) -> (tensor<2x4x3x3xf32> {castor.name = "output"}) {
  %g = castor.parameter "bn.weight" {trainable} : tensor<4xf32>
  %b = castor.parameter "bn.bias" {trainable} : tensor<4xf32>
  %rm = castor.parameter "bn.running_mean" : tensor<4xf32>
  %rv = castor.parameter "bn.running_var" : tensor<4xf32>
  %y = castor.batch_norm_inference %x, %g, %b, %rm, %rv {epsilon = 1.0e-3 : f64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
  return %y : tensor<2x4x3x3xf32>
}

// -----

// A training-mode export's BatchNorm: frozen on its running statistics (frozen), as it is
// otherwise.
// TRAIN-LABEL: func.func @forward
// TRAIN: castor.batch_norm_training %arg0, {{.*}} running(
// FROZEN-LABEL: func.func @forward
// FROZEN-NOT: batch_norm_training
// FROZEN: castor.batch_norm_inference %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
// ASIS-LABEL: func.func @forward
// ASIS: castor.batch_norm_training %arg0, {{.*}} running(
func.func @forward(%x: tensor<2x4x3x3xf32> {castor.name = "input"}) -> (tensor<2x4x3x3xf32> {castor.name = "output"}) {
  %g = castor.parameter "bn.weight" {trainable} : tensor<4xf32>
  %b = castor.parameter "bn.bias" {trainable} : tensor<4xf32>
  %rm = castor.parameter "bn.running_mean" : tensor<4xf32>
  %rv = castor.parameter "bn.running_var" : tensor<4xf32>
  %y, %m, %s = castor.batch_norm_training %x, %g, %b running(%rm, %rv) : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %y : tensor<2x4x3x3xf32>
}

