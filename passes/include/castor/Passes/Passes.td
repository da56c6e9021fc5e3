//===- Passes.td - Castor's transformation passes --------------------------===//
//
// The graph-level transformations of the castor dialect. The passes that lower a function
// to plan-level form (castor-select-kernels, castor-plan-memory) are declared beside the
// plan emitter, in compiler/include/castor/Plan/PlanPasses.td.
//
//===----------------------------------------------------------------------===//

#ifndef CASTOR_PASSES_TD
#define CASTOR_PASSES_TD

include "mlir/Pass/PassBase.td"

def CastorCastCleanup : Pass<"castor-cast-cleanup"> {
  let summary = "Removes cast chains whose first cast is exact";
  let description = [{
    `cast(cast(x : A -> B) : B -> C)` becomes `cast(x : A -> C)` (or `x` when C is A) only
    when every value of A is exactly representable in B: f16 -> f32 -> f16 folds,
    f32 -> f16 -> f32 never does, since the narrowing cast rounds. Casts to the same type
    disappear. A cast of a constant becomes a constant of the cast's type, rounded to
    nearest-even as the cast kernels round.
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorAttachLoss : Pass<"castor-attach-loss", "mlir::ModuleOp"> {
  let summary = "Appends softmax cross-entropy to the forward function";
  let description = [{
    `@forward(images) -> logits [N, C]` becomes `@forward(images, labels) -> (loss, logits)`
    with a mean softmax cross-entropy over i64 class labels [N]. The bindings are renamed to
    what `castor-run train` feeds: images, labels, loss, logits.
  }];
  let options = [
    Option<"labelSmoothing", "label-smoothing", "double", /*default=*/"0.0", "label smoothing in [0, 1]">,
  ];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorMakeTrainStep : Pass<"castor-make-train-step", "mlir::ModuleOp"> {
  let summary = "Builds train_step: backward by reverse-mode autodiff, optimizer, state updates";
  let description = [{
    Turns `@forward(images, labels) -> (loss, logits)` into
    `@train_step(state..., images, labels) -> (state'..., loss, correct)`. Parameters become
    state arguments; the backward graph comes from each op's VJP (AutodiffOpInterface) in
    reverse order, summing gradients of values used more than once; an op without a VJP on
    the path to the loss is an error naming it. Then: the optimizer (SGD or AdamW, fp32
    state, optional exemption of rank-1 parameters — BatchNorm and biases — from weight
    decay), the learning rate from the iteration counter, BatchNorm running statistics as
    PyTorch keeps them, dropout masks keyed by the iteration, and both counters. State:
    every parameter, `<name>.momentum_buffer` (SGD) or `<name>.exp_avg`/`.exp_avg_sq` (AdamW),
    `castor.iteration` and `castor.optimizer_step`. With `micro-batches` k > 1 the step takes
    k times the forward's batch, runs forward and backward on each slice (BatchNorm statistics
    per micro-batch, running statistics updated k times, as k PyTorch forward passes would),
    and applies the optimizer once to the summed gradients of the mean loss.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"", "sgd, adamw or none (gradients only)">,
    Option<"lr", "lr", "double", /*default=*/"0.1", "base learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0", "weight decay (decoupled for AdamW)">,
    Option<"noDecayBnBias", "no-decay-bn-bias", "bool", /*default=*/"false",
           "exempt rank-1 parameters (BatchNorm scale/bias, biases) from weight decay">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"constant\"", "constant, step or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0", "linear warm-up steps">,
    Option<"stepSize", "step-size", "int64_t", /*default=*/"1", "step schedule: steps per decay">,
    Option<"gamma", "gamma", "double", /*default=*/"0.1", "step schedule: decay factor">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"1", "cosine schedule: length">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0", "cosine schedule: final learning rate">,
    Option<"dropoutSeed", "dropout-seed", "int64_t", /*default=*/"0", "seed of the dropout masks">,
    Option<"emitGradients", "emit-gradients", "bool", /*default=*/"false",
           "also return every parameter's gradient (for gradient checks)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "gradient accumulation: the step takes this many micro-batches of the forward's batch, "
           "sums their gradients (each loss weighted 1/k) and updates once">,
    Option<"zeroGradients", "zero-gradients", "std::string", /*default=*/"\"\"",
           "comma-separated globs of parameter names whose gradients are forced to zero (ablations)">,
  ];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorBatchNormForm : Pass<"castor-batch-norm-form", "mlir::ModuleOp"> {
  let summary = "Trains every BatchNorm of @forward one way, whatever form the export gave it";
  let description = [{
    `form=train`: each inference-form BatchNorm (an eval-mode export) becomes the training
    form on batch statistics, its mean and variance becoming running statistics the step
    updates (PyTorch's momentum 0.1). `form=frozen`: each training-form BatchNorm with running
    statistics becomes the inference form on them, which trains with the statistics frozen
    (scale and bias still train, as PyTorch's BatchNorm in eval mode). `form=as-exported`
    changes nothing. In every form, running statistics that are trainable parameters (an
    exporter's merge of equal initializers) are refused, naming them, wherever the step would
    read them as statistics. Runs on @forward before castor-attach-loss.
  }];
  let options = [
    Option<"form", "form", "std::string", /*default=*/"\"as-exported\"", "as-exported, train or frozen">,
  ];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorInferenceForm : Pass<"castor-inference-form", "mlir::ModuleOp"> {
  let summary = "Turns @forward into its inference form for evaluation";
  let description = [{
    BatchNorm in training form with running statistics becomes batch_norm_inference on them;
    training-form dropout becomes the identity. The bindings are renamed to images and
    output, what `castor-run eval` feeds and reads.
  }];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorAutocast : Pass<"castor-autocast", "mlir::ModuleOp"> {
  let summary = "Inserts the casts of mixed-precision training into @forward";
  let description = [{
    Runs on the forward function with its loss, before castor-make-train-step, so that the
    VJP of each cast (a cast back) gives the backward graph the forward's precision. Ops
    choose by their PrecisionOpInterface class: convolutions and matrix products in
    `precision` (fp16 or bf16); the loss and reductions in fp32; softmax "mixed" (its input's
    type, computed in f32 inside the kernel: attention's probabilities in f16 or bf16, as
    PyTorch AMP casts them for the product that follows); BatchNorm "mixed",
    as PyTorch AMP runs it: no cast on its input, which stays in the precision it arrives in
    (as do its output and, in the backward, dy and dx), with fp32 scale, bias and
    statistics; the rest in the widest type of their inputs, where a constant (an exported
    Python scalar) and the parameter added to a matrix product (a linear layer's bias, which
    ONNX splits into MatMul and Add) take the others' type instead, as in PyTorch AMP, whose
    linear layer adds its bias in low precision. Parameters stay fp32 (master
    weights); each is cast once and that copy serves every use, forward and backward. A
    JSON `policy` file overrides the class per op type or per layer (ONNX node names, globs
    allowed): `{"ops": {"gemm": "fp32"}, "layers": {"/conv1/Conv": "fp32"}}` with values
    "fp32", "low", "mixed" (BatchNorm's class: operand 0 keeps its type, the other operands
    become f32) or "neutral"; a layer rule wins over an op rule.
    `{"ops": {"batch_norm_training": "fp32", "batch_norm_inference": "fp32"}}` restores
    BatchNorm with fp32 input and output.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp16\"", "fp16 or bf16">,
    Option<"policy", "policy", "std::string", /*default=*/"\"\"", "JSON file of per-op and per-layer overrides">,
  ];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorDataParallel : Pass<"castor-data-parallel", "mlir::ModuleOp"> {
  let summary = "Averages the gradients across data-parallel replicas, bucket by bucket";
  let description = [{
    Runs on train_step after castor-make-train-step and before castor-loss-scale. The gradients
    the optimizer applies are grouped into buckets of at most `bucket-bytes` in the order the
    backward computes them (a gradient larger than a bucket is a bucket of its own), as
    DistributedDataParallel groups them. Each bucket gets one `castor.all_reduce` (mean) placed
    right after the op that computes its last gradient, so that a backend can overlap it with the
    rest of the backward; the optimizer (and the loss scaler's unscale, which then sees the same
    gradients on every replica and skips the same steps) reads the averaged values. The `loss`
    output is averaged and `correct` summed over the replicas, for the log. The number of
    replicas is the run's, not the plan's: one plan serves any; with one replica the reduction
    changes nothing. Batch norm keeps per-replica statistics (DistributedDataParallel's default);
    with `sync-batch-norm` every batch_norm_training, its backward and its running-statistics
    update get `sync`: statistics over all the replicas' batches together, forward and backward,
    as torch.nn.SyncBatchNorm.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"25 << 20", "largest bucket, in bytes">,
    Option<"syncBatchNorm", "sync-batch-norm", "bool", /*default=*/"false",
           "batch statistics over every replica's batch (SyncBatchNorm)">,
  ];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorLossScale : Pass<"castor-loss-scale", "mlir::ModuleOp"> {
  let summary = "Loss scaling with GradScaler's semantics, and gradient clipping, in train_step";
  let description = [{
    Runs after castor-make-train-step. The loss gradient's seed becomes the loss scale; the
    gradients are unscaled in place before the optimizer (found_inf set on any inf/NaN),
    optionally clipped to a global norm, and on found_inf the update of parameters, optimizer
    moments and the optimizer's step count is skipped (the iteration counter advances).
    `dynamic` keeps the scale as state (`castor.loss_scale`, initialised to `init`) with its
    growth tracker and updates it on the device: backoff on overflow, growth after `interval`
    clean steps. `static` uses a fixed `init`. `guard` scales nothing but checks the gradients
    (an unscale by exactly 1) and skips a non-finite update the same way (fp32 and bf16 steps).
    `none` only clips (when asked). The step also returns `skipped_steps`, `loss_scale` (dynamic,
    static) and `steps_since_overflow` (dynamic).
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"dynamic\"", "dynamic, static, guard or none">,
    Option<"init", "init", "double", /*default=*/"65536.0", "initial (or static) scale">,
    Option<"growth", "growth", "double", /*default=*/"2.0", "growth factor">,
    Option<"backoff", "backoff", "double", /*default=*/"0.5", "backoff factor">,
    Option<"interval", "interval", "int64_t", /*default=*/"2000", "clean steps before growth">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0.0",
           "clip the global norm of the unscaled gradients to this (0: off)">,
  ];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorGradientStats : Pass<"castor-gradient-stats", "mlir::ModuleOp"> {
  let summary = "Returns per-parameter gradient statistics from train_step";
  let description = [{
    For every optimizer update, the gradient it applies (unscaled, after clipping) gets a
    gradient_stats op (mean |g|, max |g|, non-finite count), returned as
    `grad_stats:<parameter>`: what a user needs when the loss turns NaN.
  }];
  let dependentDialects = ["::castor::CastorDialect", "::mlir::func::FuncDialect"];
}

def CastorFuseLinear : Pass<"castor-fuse-linear"> {
  let summary = "Makes an exported linear layer (MatMul by a transposed weight, then Add of its bias) one gemm";
  let description = [{
    Runs on the forward function before autocast. torch.onnx writes `nn.Linear` applied to a
    tensor of rank above 2 (a transformer's tokens) as `MatMul(x, Transpose(W))` followed by
    `Add(b, ...)`. `matmul(x, transpose(W, [1, 0]))` with W a parameter becomes
    `reshape(gemm(reshape(x, [rows, K]), W, b) {trans_b})` back to the product's shape: the
    weight is read transposed by the matrix library instead of copied each step, and the bias
    (a rank-1 parameter of length N added by the product's only user) is added by the gemm's
    epilogue. A product whose second operand is anything else is left alone.
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorFuseAttention : Pass<"castor-fuse-attention"> {
  let summary = "Makes the exporters' matmul-softmax-matmul attention one castor.attention";
  let description = [{
    Runs on the forward function before autocast, for mixed-precision steps (the fused kernel,
    cuDNN's scaled dot-product attention, runs in f16 or bf16; an f32 step keeps the chain).
    `matmul(softmax(matmul(q', k')), v)` over rank-4 tensors [B, H, S, D] becomes
    `castor.attention q, k, v {scale}` when:
    - q' is q or `mul(q, c)`; k' is `transpose(k, [0, 1, 3, 2])`, with a `mul(., c)` before or
      after the transpose or neither; the scores may be scaled by `mul(., c)` before the
      softmax; each c is a constant holding one value, and `scale` is their product (1 with
      none);
    - the softmax is over the last axis and every intermediate value has one user (the
      backward then needs none of them: it recomputes the probabilities from the saved
      log-sum-exp);
    - q, k and v share B and H, and the head sizes D and Dv are multiples of 8 up to 128 (what
      cuDNN's fused attention takes).
    torch.onnx writes `nn.MultiheadAttention` (and torchvision's ViT) this way, with the scale
    split as 1/sqrt(sqrt(D)) on q and on k.
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorFuseGelu : Pass<"castor-fuse-gelu"> {
  let summary = "Replaces the erf chain of an exported GELU by one castor.gelu";
  let description = [{
    Runs on the forward function before autocast. Exporters write GELU as
    `x * (1 + erf(x * (1 / sqrt 2))) * 0.5` (torch.onnx: Div by sqrt 2, Erf, Add 1, Mul x,
    Mul 0.5; the importer turns the Div into a Mul), or with the half taken first,
    `(x * 0.5) * (1 + erf(x / sqrt 2))`. Each such chain becomes `castor.gelu x`: one kernel
    forward and one backward instead of five and eight, and no intermediate kept for the
    backward. It does not fire where an intermediate value has another user, or where a
    constant differs from 1/sqrt 2, 1 or 0.5 (relative 1e-6: the exporters' f32 constants).
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorFuseBatchNormRelu : Pass<"castor-fuse-batch-norm-relu"> {
  let summary = "Fuses batch_norm_training, the residual add and relu, forward and backward";
  let description = [{
    Runs on train_step after autodiff and loss scaling. Each
    `relu(batch_norm_training(x) [+ z])` whose relu_backward feeds the batch norm's
    batch_norm_training_backward becomes `batch_norm_relu_training` and, where relu_backward
    was, `batch_norm_relu_training_backward` (its fourth result, the masked gradient, replaces
    relu_backward's result for every other user: the residual's gradient). The fused ops compute
    what the group computes (runtime/plan/ops.md); the runtime runs each as one fused kernel
    where the GPU library has one, else as the group's kernels.

    It does not fire on f32 batch norms (a layer the precision policy keeps in fp32: no fused
    kernel exists for it), on a normalised value with another user, on an add that broadcasts,
    on inference-form batch norm, or on a forward without its backward.
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorFuseGradientAdd : Pass<"castor-fuse-gradient-add"> {
  let summary = "Adds an input's other gradient in its convolution's data-gradient kernel";
  let description = [{
    Runs on train_step after autodiff. An input read by a convolution and by something else
    (a residual block's input: its convolution and the skip connection; a DenseNet feature
    map) gets the sum of its gradients, `add(g, conv2d_backward_data(dy, w))`. Where the data
    gradient has no other user and the add does not broadcast, the pair becomes
    `conv2d_backward_data dy, w accumulate(g)`: the GPU backend then weighs cuDNN's
    convolution with the add in its epilogue against the convolution and a separate add, and
    keeps the faster per layer; the CPU backend composes the two. Of two data gradients
    summed, the later one takes the earlier as its accumulator. The fused op sits where the
    convolution was when g is computed before it, else where the add was.
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorScheduleCasts : Pass<"castor-schedule-casts", "mlir::func::FuncOp"> {
  let summary = "Places the step's casts next to each other so that a backend casts them in one launch";
  let description = [{
    Runs after fusion and cast cleanup. In a training step (a function with a loss), the casts
    of its arguments whose results the backward also reads (the low-precision copies of the
    weights) move to the start of the step, in their order: their results live into the
    backward anyway. Every widening cast of a computed value (the f32 copies of the
    gradients) moves down to just before its first reader, so that the gradients' casts sit
    together before the optimizer's first reader, or before their bucket's all_reduce. Values
    and dependences are unchanged; the GPU backend runs consecutive casts of one dtype pair
    as one multi-tensor launch. Runs after castor-recompute: moving a widening cast down only
    shortens what the step holds, while moving the casts of arguments up holds them longer in
    the forward, so a step that recomputes (planned against a memory budget) keeps those where
    they are (`hoist-parameter-casts=false`).
  }];
  let options = [
    Option<"hoistParameterCasts", "hoist-parameter-casts", "bool", /*default=*/"true",
           "move the casts of the step's arguments that the backward reads to the start">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorFuseElementwise : Pass<"castor-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Groups chains of element-wise ops into fused_elementwise ops, one generated kernel each";
  let description = [{
    Runs on the whole step after autodiff, autocast and the pattern fusions, before
    castor-recompute (which then plans the memory of the fused step and recomputes a group as a
    whole) and kernel selection. An op joins a group when the plan library can run it in a
    program (add, mul, cast, the unary element-wise ops and their gradients:
    runtime/plan/elementwise_program.h), its result has the group's shape (the domain; its
    operands may broadcast to it: per channel, per sample, per token), and it reads a value of
    the group. Groups of one op stay as they are. A group becomes one `fused_elementwise`
    placed where every value it reads is ready and before any op outside it reads one of its
    values; a merge that leaves no such place (a value needed by two groups across a
    reduction, a forward op and the backward op that reads its output) is not made. Values the
    group computes and nothing outside reads are never stored. Precision is unchanged: every
    op keeps its element type in the program, so an fp32-policy layer stays fp32 and casts
    stay where autocast put them. A group reads at most `max-inputs` tensors and writes at
    most `max-outputs`.
  }];
  let options = [
    Option<"maxInputs", "max-inputs", "int64_t", /*default=*/"8", "most tensors a group reads">,
    Option<"maxOutputs", "max-outputs", "int64_t", /*default=*/"4", "most tensors a group writes">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorRecomputeElementwise : Pass<"castor-recompute-elementwise", "mlir::func::FuncOp"> {
  let summary = "Recomputes, inside the backward's element-wise groups, forward values it would otherwise keep";
  let description = [{
    Runs on a training step (a function with a loss) just before castor-fuse-elementwise. A
    forward value is recomputed in the backward when computing it again costs no memory and
    no kernel: its op can be in a fused program (castor-fuse-elementwise's rule) and is cheap to
    recompute; every operand is one the copy may read without raising the step's memory at any
    point (a parameter, a constant or an argument of the step; a value the backward reads there
    or later; or one no larger than the value, which then lives in its stead: a value the
    backward last reads a little earlier, or one recomputed itself, whose copy the copy reads);
    and every backward reader is an
    element-wise op of the same shape, whose group the copy then joins. SiLU exported as
    sigmoid and mul is the case: the backward reads the sigmoid's output and its input; the
    input is kept, so the sigmoid is computed again in the gradient's group and its output is
    never stored (PyTorch's SiLU keeps its input alone). The copy is built as castor-recompute
    builds its copies (castor.recomputed), the same op on the same operands, so the values are
    the same bits. The function gets `castor.recomputed_in_groups`, the number of such values, and
    `castor.recomputed_in_groups_bytes`, their sizes summed.
  }];
  let dependentDialects = ["::castor::CastorDialect"];
}

def CastorRecompute : Pass<"castor-recompute", "mlir::func::FuncOp"> {
  let summary = "Recomputes values in the backward instead of keeping them from the forward";
  let description = [{
    Runs on train_step after fusion. A candidate is a floating-point result of an op that can
    run again (RecomputeOpInterface) computed before the step's last loss and read after it,
    by the backward. A recomputed candidate is built again (`castor.recomputed`) just before
    its first backward reader, which with every later backward reader reads the copy; the
    forward value then dies after its last forward reader. A copy's operands that are
    recomputed are copies too, as are cheap operands nothing in the backward reads (so that the
    copy does not keep them alive).

    Policies: `none`; `cheap`, every candidate of a cheap op (element-wise work, casts, the
    residual add, a batch norm's output from its statistics), keeping every convolution
    output; `auto`, candidates convolutions included, in order of bytes saved per second the
    copy costs on a roofline (max of its bytes read and written over `bandwidth-gbs` and its
    flops over `peak-tflops`, plus `launch-us`; the largest first among equals), taking the
    shortest prefix of that order whose planned peak (the arena as castor-plan-memory would
    place it, the buffers a backend allocates beside it, and the plan's workspace limit with
    `workspace-bytes` of library workspace, StepLiveness.h) fits `memory-budget`: prefixes at a stride of 1/32 of the candidates,
    then bisection (the peak falls with the prefix until copies chain, then rises). A
    1x1 convolution over few channels costs about what an element-wise pass over its output
    does, so it can come before a batch norm's output; a 3x3 convolution comes late. When
    even recomputing every candidate does not fit, the pass fails and names the smallest
    peak it reached. The function gets `castor.recompute_policy`, `castor.recomputed_values`
    and `castor.recompute_flops`.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"", "none, cheap or auto">,
    Option<"memoryBudget", "memory-budget", "std::string", /*default=*/"\"\"",
           "planned peak the auto policy must fit, e.g. 6GiB, 512MiB or bytes">,
    Option<"workspaceBytes", "workspace-bytes", "int64_t", /*default=*/"0",
           "library workspace the plan allows, which the budget also covers (0: the default, 1/64 of the arena between 128 and 512 MiB)">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"256", "the memory planner's alignment">,
    Option<"bandwidthGBs", "bandwidth-gbs", "double", /*default=*/"3000",
           "the roofline's memory bandwidth in GB/s, for the cost of a copy">,
    Option<"peakTflops", "peak-tflops", "double", /*default=*/"300",
           "the roofline's arithmetic rate in TFLOP/s, for the cost of a copy">,
    Option<"launchMicroseconds", "launch-us", "double", /*default=*/"5",
           "the fixed cost of one more kernel, in microseconds">,
  ];
  let dependentDialects = ["::castor::CastorDialect"];
}

#endif // CASTOR_PASSES_TD
