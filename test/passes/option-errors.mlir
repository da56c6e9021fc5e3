// A pass run alone refuses a wrong mode option, with the values it takes (the lists
// CompileOptions::validate checks castor compile's flags against).
// RUN: not castor-opt %s -castor-attach-loss -castor-autocast="precision=fp32" 2>&1 | FileCheck --check-prefix=AUTOCAST %s
// RUN: not castor-opt %s -castor-batch-norm-form="form=sometimes" 2>&1 | FileCheck --check-prefix=FORM %s
// RUN: not castor-opt %s -castor-attach-loss -castor-make-train-step="optimizer=lion" 2>&1 | FileCheck --check-prefix=OPTIMIZER %s
// RUN: not castor-opt %s -castor-attach-loss -castor-make-train-step -castor-loss-scale="mode=wild" 2>&1 | FileCheck --check-prefix=SCALE %s
// RUN: not castor-opt %s -castor-attach-loss -castor-make-train-step -castor-loss-scale="mode=static init=0" 2>&1 | FileCheck --check-prefix=POSITIVE %s
// RUN: not castor-opt %s -pass-pipeline='builtin.module(func.func(castor-recompute{policy=sometimes}))' 2>&1 | FileCheck --check-prefix=RECOMPUTE %s
// RUN: not castor-opt %s -pass-pipeline='builtin.module(func.func(castor-recompute{memory-budget=1GiB}))' 2>&1 | FileCheck --check-prefix=BUDGET %s
// RUN: not castor-opt %s -pass-pipeline='builtin.module(func.func(castor-select-kernels{target=tpu}))' 2>&1 | FileCheck --check-prefix=TARGET %s

// AUTOCAST: error: precision must be fp16 or bf16, got 'fp32'
// FORM: error: form must be as-exported, train or frozen, not 'sometimes'
// OPTIMIZER: error: optimizer must be sgd, adamw or none, got 'lion'
// SCALE: error: loss-scale mode must be dynamic, static, guard or none, got 'wild'
// POSITIVE: error: the loss scale must be positive
// RECOMPUTE: error: recompute policy must be none, cheap or auto, got 'sometimes'
// BUDGET: error: a memory budget needs the recompute policy auto, not none
// TARGET: error: target must be cpu or cuda, got 'tpu'

func.func @forward(%x: tensor<2x4xf32> {castor.name = "input"}) -> (tensor<2x3xf32> {castor.name = "output"}) {
  %w = castor.parameter "fc.weight" {trainable} : tensor<3x4xf32>
  %y = castor.gemm %x, %w {trans_b = true} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
