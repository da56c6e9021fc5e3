// The whole training pipeline of castor compile --train, run by castor-opt on a small model
// (Inputs/small-resnet.mlir: conv-BN-ReLU, a residual block, a linear classifier).
// RUN: castor-opt %S/Inputs/small-resnet.mlir --castor-train-pipeline="precision=fp16 fuse=auto" > %t.auto
// RUN: FileCheck %s < %t.auto
// RUN: FileCheck --check-prefix=FUSED %s < %t.auto
// RUN: castor-opt %S/Inputs/small-resnet.mlir --castor-train-pipeline="precision=fp16 fuse=none" > %t.none
// RUN: FileCheck --check-prefix=NONE %s < %t.none
// RUN: FileCheck --check-prefix=UNFUSED %s < %t.none
// RUN: castor-opt %S/Inputs/small-resnet.mlir --castor-train-pipeline="optimizer=adamw workspace-limit=256MiB" > %t.fp32
// RUN: FileCheck --check-prefix=ADAMW %s < %t.fp32
// RUN: FileCheck --check-prefix=F32 %s < %t.fp32

// fp16 with every fusion: the step's state (parameters, momentum buffers, counters, the dynamic
// loss scaler's scale and growth tracker, the skipped steps), then the batch; the outputs; and
// the function in plan-level form with the workspace limit recorded (0: auto).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: castor.state = "conv1.weight", castor.trainable}
// CHECK-SAME: castor.state = "conv1.weight.momentum_buffer"}
// CHECK-SAME: castor.state = "castor.iteration"}
// CHECK-SAME: castor.state = "castor.optimizer_step"}
// CHECK-SAME: %[[SCALE:[a-z0-9]+]]: tensor<f32> {castor.init = #castor.init<fill>, castor.init_value = 6.553600e+04 : f64, castor.state = "castor.loss_scale"}
// CHECK-SAME: castor.state = "castor.loss_scale_growth_tracker"}
// CHECK-SAME: castor.state = "castor.skipped_steps"}
// CHECK-SAME: %[[IMAGES:[a-z0-9]+]]: tensor<2x3x4x4xf32> {castor.name = "images"}, %[[LABELS:[a-z0-9]+]]: tensor<2xi64> {castor.name = "labels"})
// CHECK-SAME: tensor<f32> {castor.name = "loss"}, tensor<i64> {castor.name = "correct"}, tensor<f32> {castor.name = "lr"}, tensor<i64> {castor.name = "skipped_steps"}, tensor<f32> {castor.name = "loss_scale"}, tensor<i64> {castor.name = "steps_since_overflow"})
// CHECK-SAME: castor.arena_bytes =
// CHECK-SAME: castor.workspace_limit = 0 : i64

// Forward in f16 (autocast), BatchNorm and ReLU fused (castor-fuse-batch-norm-relu, the residual
// add included), the classifier one gemm (castor-fuse-linear); every op has its kernel.
// CHECK: castor.cast %[[IMAGES]] {castor.kernel = "cast"{{.*}} to tensor<2x3x4x4xf16>
// CHECK: castor.batch_norm_relu_training %{{.*}} : (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK: castor.batch_norm_relu_training %{{.*}} residual(%{{.*}})
// CHECK: %[[LOGITS:.*]] = castor.gemm {{.*}}trans_b = true} : (tensor<2x8xf16>, tensor<10x8xf16>, tensor<10xf16>) -> tensor<2x10xf16>
// CHECK: %[[LOGITS32:.*]] = castor.cast %[[LOGITS]]
// The loss in f32, its gradient seeded with the loss scale.
// CHECK: %[[LOSS:.*]] = castor.softmax_cross_entropy %[[LOGITS32]], %[[LABELS]] {castor.kernel = "softmax_cross_entropy"
// CHECK: castor.softmax_cross_entropy_backward %[[SCALE]], %[[LOGITS32]], %[[LABELS]]
// Backward: the fused BatchNorm-ReLU backward, and the residual's gradient added by its
// convolution's data gradient (castor-fuse-gradient-add).
// CHECK: castor.batch_norm_relu_training_backward
// CHECK: castor.conv2d_backward_data %{{.*}}, %{{.*}} accumulate(%{{.*}})
// The optimizer: gradients unscaled, each of the 8 parameters updated unless one is non-finite.
// CHECK: %[[LR:.*]] = castor.lr_schedule
// CHECK: %{{.*}}:8, %[[INF:.*]] = castor.unscale_gradients {{.*}} scale %[[SCALE]]
// CHECK-COUNT-8: castor.sgd_update {{.*}}, %[[LR]], %{{.*}} skip_if %[[INF]]
// CHECK: castor.update_loss_scale %[[SCALE]]
// CHECK: return {{.*}}, %[[LOSS]],

// Nothing of the unfused forms is left.
// FUSED-NOT: castor.relu
// FUSED-NOT: castor.batch_norm_training
// FUSED-NOT: castor.matmul
// FUSED-NOT: castor.transpose

// fuse=none: the exported ops, forward and backward, as they came.
// NONE-LABEL: func.func @train_step
// NONE: castor.batch_norm_training {{.*}}(tensor<2x8x4x4xf16>
// NONE: castor.relu
// NONE: castor.add
// NONE: castor.transpose
// NONE: castor.matmul
// NONE: castor.softmax_cross_entropy
// NONE: castor.relu_backward
// NONE: castor.batch_norm_training_backward
// NONE-COUNT-8: castor.sgd_update
// UNFUSED-NOT: batch_norm_relu
// UNFUSED-NOT: accumulate(

// fp32 AdamW: the optimizer's two moments per parameter, the non-finite guard instead of a
// loss scale, no casts, no fused BatchNorm (no kernel fuses it in f32), and the workspace limit.
// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME: castor.state = "conv1.weight.exp_avg"}
// ADAMW-SAME: castor.state = "conv1.weight.exp_avg_sq"}
// ADAMW-SAME: castor.state = "castor.skipped_steps"}
// ADAMW-SAME: castor.workspace_limit = 268435456 : i64
// ADAMW-COUNT-8: castor.adamw_update
// F32-NOT: castor.loss_scale
// F32-NOT: castor.cast
// F32-NOT: batch_norm_relu
