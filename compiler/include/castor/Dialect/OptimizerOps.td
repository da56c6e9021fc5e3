//===- OptimizerOps.td - castor optimizer, schedule and state-update ops --===//
//
// The ops make-train-step appends after the backward graph. Each update returns the new value
// of state it was given; the plan writes it in place (InPlaceOpInterface).
//
//===----------------------------------------------------------------------===//

#ifndef CASTOR_OPTIMIZER_OPS_TD
#define CASTOR_OPTIMIZER_OPS_TD

include "castor/Dialect/CastorEnums.td"
include "castor/Dialect/CastorInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Castor_ScalarF32 : 0DTensorOf<[F32]>;
def Castor_ScalarI64 : 0DTensorOf<[I64]>;

class Castor_UpdateOp<string mnemonic, list<Trait> traits = []>
    : Castor_Op<mnemonic, !listconcat([Pure, Castor_KernelOpInterface,
                                       DeclareOpInterfaceMethods<Castor_InPlaceOpInterface>], traits)>;

def Castor_SgdUpdateOp : Castor_UpdateOp<"sgd_update",
    [AllTypesMatch<["param", "new_param"]>, AllTypesMatch<["momentum_buffer", "new_momentum_buffer"]>]> {
  let summary = "one step of torch.optim.SGD (momentum, nesterov, weight decay)";
  let description = [{
    g = grad + weight_decay * param; with momentum, buf = momentum * buf + (1 - dampening) * g
    (buf = g on the first step, `step` == 1) and g = g + momentum * buf (nesterov) or buf;
    param -= lr * g. `step` is the optimizer's step count after this step's increment.

    ```mlir
    %p2, %b2 = castor.sgd_update %p, %g, %b, %lr, %step {momentum = 9.0e-01 : f64}
        : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$param, Castor_FloatTensor:$grad, Castor_FloatTensor:$momentum_buffer,
                       Castor_ScalarF32:$lr, Castor_ScalarI64:$step,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening);
  let results = (outs Castor_FloatTensor:$new_param, Castor_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $step attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Castor_AdamwUpdateOp : Castor_UpdateOp<"adamw_update",
    [AllTypesMatch<["param", "new_param"]>, AllTypesMatch<["exp_avg", "new_exp_avg"]>,
     AllTypesMatch<["exp_avg_sq", "new_exp_avg_sq"]>]> {
  let summary = "one step of torch.optim.AdamW (decoupled weight decay, bias correction)";
  let description = [{
    param *= 1 - lr * weight_decay; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
    param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).

    ```mlir
    %p2, %m2, %v2 = castor.adamw_update %p, %g, %m, %v, %lr, %step
        : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i64>)
        -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$param, Castor_FloatTensor:$grad, Castor_FloatTensor:$exp_avg,
                       Castor_FloatTensor:$exp_avg_sq, Castor_ScalarF32:$lr, Castor_ScalarI64:$step,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1.0e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let results = (outs Castor_FloatTensor:$new_param, Castor_FloatTensor:$new_exp_avg,
                      Castor_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Castor_BatchNormRunningUpdateOp : Castor_UpdateOp<"batch_norm_running_update",
    [AllTypesMatch<["running_mean", "new_running_mean"]>, AllTypesMatch<["running_var", "new_running_var"]>]> {
  let summary = "PyTorch's update of BatchNorm running statistics";
  let description = [{
    running_mean = (1 - momentum) running_mean + momentum * batch_mean;
    running_var = (1 - momentum) running_var + momentum * unbiased batch variance, where the
    biased variance is 1 / batch_inv_std^2 - epsilon and `count` is the number of elements per
    channel (the unbiased one multiplies by count / (count - 1)).

    ```mlir
    %rm2, %rv2 = castor.batch_norm_running_update %rm, %rv, %mean, %invstd {count = 128 : i64}
        : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$running_mean, Castor_FloatTensor:$running_var,
                       Castor_FloatTensor:$batch_mean, Castor_FloatTensor:$batch_inv_std,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                       I64Attr:$count);
  let results = (outs Castor_FloatTensor:$new_running_mean, Castor_FloatTensor:$new_running_var);
  let assemblyFormat = [{
    $running_mean `,` $running_var `,` $batch_mean `,` $batch_inv_std attr-dict `:` functional-type(operands, results)
  }];
}

def Castor_IncrementOp : Castor_UpdateOp<"increment", [AllTypesMatch<["counter", "new_counter"]>]> {
  let summary = "adds one to a step counter";
  let description = [{
    ```mlir
    %it2 = castor.increment %it : tensor<i64>
    ```
  }];
  let arguments = (ins Castor_ScalarI64:$counter);
  let results = (outs Castor_ScalarI64:$new_counter);
  let assemblyFormat = "$counter attr-dict `:` type($counter)";
}

def Castor_LrScheduleOp : Castor_Op<"lr_schedule", [Pure, Castor_KernelOpInterface]> {
  let summary = "the learning rate of this step, from the iteration counter";
  let description = [{
    `kind` is "constant", "step" (base_lr * gamma^floor(it / step_size)) or "cosine" (from
    base_lr to min_lr over total_steps); all start with a linear warm-up of `warmup_steps`
    (lr = base_lr * (it + 1) / warmup_steps). `it` counts from 0.

    ```mlir
    %lr = castor.lr_schedule %it {kind = "cosine", base_lr = 1.0e-01 : f64, total_steps = 1000 : i64}
        : (tensor<i64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Castor_ScalarI64:$iteration,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$kind,
                       F64Attr:$base_lr,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "1">:$step_size,
                       DefaultValuedAttr<F64Attr, "0.1">:$gamma,
                       DefaultValuedAttr<I64Attr, "1">:$total_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$min_lr);
  let results = (outs Castor_ScalarF32:$lr);
  let assemblyFormat = "$iteration attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // CASTOR_OPTIMIZER_OPS_TD
