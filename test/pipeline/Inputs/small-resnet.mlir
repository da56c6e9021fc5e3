// A small model as castor import gives it: a conv-BN-ReLU block, a residual block whose second
// BatchNorm adds the block's input before its ReLU, global average pooling and a linear
// classifier exported as MatMul by the transposed weight plus the bias.
module attributes {castor.batch = 2 : i64} {
  func.func @forward(%x: tensor<2x3x4x4xf32> {castor.name = "input"}) -> (tensor<2x10xf32> {castor.name = "output"}) {
    %w1 = castor.parameter "conv1.weight" {trainable} : tensor<8x3x3x3xf32>
    %c1 = castor.conv2d %x, %w1 {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x4x4xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x4x4xf32>
    %g1 = castor.parameter "bn1.weight" {trainable} : tensor<8xf32>
    %b1 = castor.parameter "bn1.bias" {trainable} : tensor<8xf32>
    %m1 = castor.parameter "bn1.running_mean" : tensor<8xf32>
    %v1 = castor.parameter "bn1.running_var" : tensor<8xf32>
    %y1, %mean1, %istd1 = castor.batch_norm_training %c1, %g1, %b1 running(%m1, %v1) : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %r1 = castor.relu %y1 : tensor<2x8x4x4xf32>
    %w2 = castor.parameter "conv2.weight" {trainable} : tensor<8x8x3x3xf32>
    %c2 = castor.conv2d %r1, %w2 {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x4x4xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x4x4xf32>
    %g2 = castor.parameter "bn2.weight" {trainable} : tensor<8xf32>
    %b2 = castor.parameter "bn2.bias" {trainable} : tensor<8xf32>
    %m2 = castor.parameter "bn2.running_mean" : tensor<8xf32>
    %v2 = castor.parameter "bn2.running_var" : tensor<8xf32>
    %y2, %mean2, %istd2 = castor.batch_norm_training %c2, %g2, %b2 running(%m2, %v2) : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
    %s = castor.add %y2, %r1 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
    %r2 = castor.relu %s : tensor<2x8x4x4xf32>
    %p = castor.global_avg_pool %r2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
    %f = castor.flatten %p : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
    %w = castor.parameter "fc.weight" {trainable} : tensor<10x8xf32>
    %b = castor.parameter "fc.bias" {trainable} : tensor<10xf32>
    %wt = castor.transpose %w {perm = array<i64: 1, 0>} : (tensor<10x8xf32>) -> tensor<8x10xf32>
    %mm = castor.matmul %f, %wt : (tensor<2x8xf32>, tensor<8x10xf32>) -> tensor<2x10xf32>
    %logits = castor.add %b, %mm : (tensor<10xf32>, tensor<2x10xf32>) -> tensor<2x10xf32>
    return %logits : tensor<2x10xf32>
  }
}
