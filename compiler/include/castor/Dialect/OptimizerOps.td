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
    param -= lr * g. `step` is the optimizer's step count after this step's increment. With
    `found_inf` set (the loss scaler saw a non-finite gradient) nothing changes.

    ```mlir
    %p2, %b2 = castor.sgd_update %p, %g, %b, %lr, %step {momentum = 9.0e-01 : f64}
        : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$param, Castor_FloatTensor:$grad, Castor_FloatTensor:$momentum_buffer,
                       Castor_ScalarF32:$lr, Castor_ScalarI64:$step, Optional<Castor_ScalarF32>:$found_inf,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening);
  let results = (outs Castor_FloatTensor:$new_param, Castor_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $step (`skip_if` $found_inf^)? attr-dict `:` functional-type(operands, results)
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
                       Optional<Castor_ScalarF32>:$found_inf,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1.0e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let results = (outs Castor_FloatTensor:$new_param, Castor_FloatTensor:$new_exp_avg,
                      Castor_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step (`skip_if` $found_inf^)? attr-dict `:` functional-type(operands, results)
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
    channel (the unbiased one multiplies by count / (count - 1)). All four operands are
    per-channel and share one element type (f32 for mixed BatchNorm on f16 or bf16 data). With
    `found_inf` set (the step's update is skipped: the loss scaler or the non-finite guard saw a
    non-finite gradient) nothing changes, so that a skipped step leaves the whole state as it was.

    ```mlir
    %rm2, %rv2 = castor.batch_norm_running_update %rm, %rv, %mean, %invstd {count = 128 : i64}
        : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    %rm3, %rv3 = castor.batch_norm_running_update %rm, %rv, %mean, %invstd skip_if %found_inf {count = 128 : i64}
        : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$running_mean, Castor_FloatTensor:$running_var,
                       Castor_FloatTensor:$batch_mean, Castor_FloatTensor:$batch_inv_std,
                       Optional<Castor_ScalarF32>:$found_inf,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                       I64Attr:$count, UnitAttr:$sync);
  let results = (outs Castor_FloatTensor:$new_running_mean, Castor_FloatTensor:$new_running_var);
  let assemblyFormat = [{
    $running_mean `,` $running_var `,` $batch_mean `,` $batch_inv_std (`skip_if` $found_inf^)? attr-dict `:`
        functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Castor_IncrementOp : Castor_UpdateOp<"increment", [AllTypesMatch<["counter", "new_counter"]>]> {
  let summary = "adds one to a step counter, optionally depending on a flag";
  let description = [{
    With a `flag` operand it counts only when the flag is clear (`when` = "clear", e.g. the
    optimizer's steps, which an overflow skips) or only when it is set (`when` = "set", e.g.
    the skipped steps).

    ```mlir
    %it2 = castor.increment %it : tensor<i64>
    %skips2 = castor.increment %skips if %found_inf {when = "set"} : tensor<i64>, tensor<f32>
    ```
  }];
  let arguments = (ins Castor_ScalarI64:$counter, Optional<Castor_ScalarF32>:$flag,
                       DefaultValuedAttr<StrAttr, "\"clear\"">:$when);
  let results = (outs Castor_ScalarI64:$new_counter);
  let assemblyFormat = "$counter (`if` $flag^)? attr-dict `:` type($counter) (`,` type($flag)^)?";
  let hasVerifier = 1;
}

def Castor_AllReduceOp : Castor_UpdateOp<"all_reduce"> {
  let summary = "reduces tensors across the replicas of a data-parallel step, in place";
  let description = [{
    Each tensor becomes the element-wise sum, mean (sum divided by the number of replicas, a
    run-time value) or max of its values on every replica. castor-data-parallel places one per
    bucket of gradients right after the bucket's last gradient is computed, and one for the
    loss and correct-count outputs. With one replica it changes nothing.

    ```mlir
    %g0r, %g1r = castor.all_reduce %g0, %g1 {reduction = "mean"}
        : (tensor<64x3x7x7xf16>, tensor<64xf32>) -> (tensor<64x3x7x7xf16>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Variadic<Castor_AnyTensor>:$values, StrAttr:$reduction);
  let results = (outs Variadic<Castor_AnyTensor>:$reduced);
  let assemblyFormat = "$values attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_UnscaleGradientsOp : Castor_UpdateOp<"unscale_gradients"> {
  let summary = "divides every gradient by the loss scale and detects non-finite values";
  let description = [{
    As GradScaler's unscale: each gradient is multiplied by 1/scale (the reciprocal taken in
    double precision) in place; `found_inf` is 1 when any result is inf or NaN, else 0.

    ```mlir
    %g0u, %g1u, %inf = castor.unscale_gradients %g0, %g1 scale %s
        : (tensor<8xf32>, tensor<4x8xf16>, tensor<f32>) -> (tensor<8xf32>, tensor<4x8xf16>, tensor<f32>)
    ```
  }];
  let arguments = (ins Variadic<Castor_FloatTensor>:$grads, Castor_ScalarF32:$scale);
  let results = (outs Variadic<Castor_FloatTensor>:$unscaled, Castor_ScalarF32:$found_inf);
  let assemblyFormat = "$grads `scale` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_ClipGradNormOp : Castor_UpdateOp<"clip_grad_norm"> {
  let summary = "scales all gradients so that their global L2 norm is at most max_norm";
  let description = [{
    As torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied when below 1.
    Runs on unscaled gradients.

    ```mlir
    %g0c, %norm = castor.clip_grad_norm %g0 {max_norm = 1.0 : f64} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<f32>)
    ```
  }];
  let arguments = (ins Variadic<Castor_FloatTensor>:$grads, F64Attr:$max_norm);
  let results = (outs Variadic<Castor_FloatTensor>:$clipped, Castor_ScalarF32:$total_norm);
  let assemblyFormat = "$grads attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Castor_UpdateLossScaleOp : Castor_UpdateOp<"update_loss_scale",
    [AllTypesMatch<["scale", "new_scale"]>, AllTypesMatch<["growth_tracker", "new_growth_tracker"]>]> {
  let summary = "GradScaler's update of the dynamic loss scale";
  let description = [{
    On found_inf: scale *= backoff, tracker = 0. Otherwise tracker += 1, and when it reaches
    `interval`: scale *= growth, tracker = 0.

    ```mlir
    %s2, %t2 = castor.update_loss_scale %s, %t, %inf : (tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<f32>, tensor<i64>)
    ```
  }];
  let arguments = (ins Castor_ScalarF32:$scale, Castor_ScalarI64:$growth_tracker, Castor_ScalarF32:$found_inf,
                       DefaultValuedAttr<F64Attr, "2.0">:$growth,
                       DefaultValuedAttr<F64Attr, "0.5">:$backoff,
                       DefaultValuedAttr<I64Attr, "2000">:$interval);
  let results = (outs Castor_ScalarF32:$new_scale, Castor_ScalarI64:$new_growth_tracker);
  let assemblyFormat = "$scale `,` $growth_tracker `,` $found_inf attr-dict `:` functional-type(operands, results)";
}

def Castor_GradientStatsOp : Castor_Op<"gradient_stats", [Pure, Castor_KernelOpInterface]> {
  let summary = "mean |g|, max |g| (finite values) and the count of non-finite values";
  let description = [{
    ```mlir
    %stats = castor.gradient_stats %g : (tensor<4x8xf32>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins Castor_FloatTensor:$grad);
  let results = (outs StaticShapeTensorOf<[F32]>:$stats);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
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
