// castor-run: inspects and executes Castor plans without the compiler.
//
//   castor-run inspect model.plan [--json]
//   castor-run infer model.plan --input x.npy --output y.npy [--weights w.safetensors]
//                               [--init-seed 0] [--device cpu] [--poison]
//   castor-run train train.plan --steps N [--data synthetic|idx:DIR|npy:DIR] [--seed S] [--weights W]
//                               [--log-json FILE] [--tensorboard DIR] [--save STATE] [--save-every K]
//                               [--resume STATE]
//                               [--grad-stats K] [--deterministic] [--on-nonfinite stop|skip]
//   castor-run eval forward.plan --weights STATE --data idx:DIR [--split test] [--json]
//   castor-run bench train.plan [--device cuda] [--steps N] [--warmup K] [--json] [--deterministic]
//
// This file holds the command line; each command lives in its own file (commands.h).

#include "commands.h"

#include <CLI/CLI.hpp>

#include <limits>
#include <string>

int main(int argc, char **argv) {
  CLI::App app{"castor-run: inspect and run Castor plans (runtime only)"};
  app.require_subcommand(1);

  std::string inspectPath;
  bool json = false;
  auto *inspectCmd = app.add_subcommand("inspect", "Show a plan's kernels, tensors, arena and parameters");
  inspectCmd->add_option("plan", inspectPath, "Plan file")->required();
  inspectCmd->add_flag("--json", json, "Machine-readable output");

  castor::run::InferOptions io;
  auto *inferCmd = app.add_subcommand("infer", "Run a plan once on inputs from .npy files");
  inferCmd->add_option("plan", io.plan, "Plan file")->required();
  inferCmd->add_option("--input,-i", io.inputs, "Input .npy file, or NAME=FILE for a plan with several inputs")
      ->required();
  inferCmd->add_option("--output,-o", io.outputs, "Output .npy file, or NAME=FILE")->required();
  inferCmd->add_option("--weights,-w", io.weights,
                       "safetensors file with parameter values (by name); default: the weights file the plan names");
  inferCmd->add_option("--init-seed", io.seed, "Seed of the initializers of parameters not in --weights");
  inferCmd->add_option("--device", io.device, "cpu or cuda (cuda: builds with -DCASTOR_ENABLE_CUDA=ON)");
  inferCmd->add_flag("--poison", io.poison, "Fill each tensor's arena slot with NaN after its last use");

  castor::run::TrainOptions to;
  auto *trainCmd = app.add_subcommand("train", "Run a training plan for a number of steps");
  trainCmd->add_option("plan", to.plan, "Training plan (inputs images, labels; outputs loss [, correct])")->required();
  trainCmd->add_option("--steps", to.steps, "Number of steps to run")->required();
  trainCmd->add_option("--data", to.data,
                       "synthetic (uniform 8-bit pixels made on the device, normalised to mean 0 and variance 1; "
                       "uniform labels), idx:DIR (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]), "
                       "npy:DIR (images.npy float [M,C,H,W], labels.npy int64 [M], in file order, wrapping around) "
                       "or folder:DIR (DIR/<class>/<image>.jpg|.png, classes sorted by name; RandomResizedCrop and "
                       "horizontal flip)");
  trainCmd
      ->add_option("--decoder", to.decoder,
                   "Image folders: where JPEGs are decoded and resized: gpu (nvJPEG and the resize on the device; "
                   "PNG and CMYK files decoded on the host), host (TurboJPEG on the host's threads), or auto "
                   "(default: gpu where the GPU has a hardware JPEG decoder, else host)")
      ->check(CLI::IsMember({"auto", "host", "gpu"}));
  trainCmd
      ->add_option("--host-decode-share", to.hostDecodeShare,
                   "With the device decoder: the share of each batch the host's threads decode and resize at the "
                   "same time, a number in [0, 1], or auto (default: from 0.5, moved while training toward the "
                   "share where the step waits for neither; fixed at 0.5 with --deterministic)")
      ->check(CLI::IsMember({"auto"}) | CLI::Range(0.0, 1.0));
  trainCmd->add_option("--decode", to.decode,
                       "Image folders: fast (JPEGs decoded at a reduced DCT scale where the crop allows) or exact "
                       "(always at full size, as torchvision)")
      ->check(CLI::IsMember({"fast", "exact"}));
  trainCmd
      ->add_option("--augment", to.augment,
                   "Image folders: standard (RandomResizedCrop + flip; validation Resize + CenterCrop) or none (each "
                   "image resized whole to the plan's size, for training and validation)")
      ->check(CLI::IsMember({"standard", "none"}));
  trainCmd->add_flag("--skip-corrupt", to.skipCorrupt,
                     "Image folders: replace a file that does not decode by the next one (counted) instead of stopping");
  trainCmd->add_option("--data-threads", to.dataThreads, "Image folders: decoding threads (default: the host's cores)");
  trainCmd->add_option("--val-plan", to.valPlan,
                       "Forward plan of the model (castor compile without --train) for validation with the current "
                       "weights and BN running statistics");
  trainCmd->add_option("--val-data", to.valData, "Validation set: idx:DIR (its --val-split files) or folder:DIR");
  trainCmd->add_option("--val-split", to.valSplit, "IDX validation split: test (t10k-*, default) or train");
  trainCmd->add_option("--eval-every", to.evalEvery, "Validate every K steps and after the last (0: after the last only)");
  trainCmd->add_option("--device", to.device, "cpu or cuda (cuda: builds with -DCASTOR_ENABLE_CUDA=ON)");
  trainCmd->add_option("--seed", to.seed,
                       "Seed of the parameter initializers and of the data (synthetic batches, shuffling); "
                       "a resumed run keeps the data seed of its state file");
  auto *weightsOpt = trainCmd->add_option(
      "--weights", to.weights,
      "safetensors file with initial parameter values; default: the weights file the plan names (castor compile "
      "writes it beside the plan)");
  trainCmd->add_option("--log-json", to.logJson, "Append one JSON line per step (step, loss, accuracy, img_per_s)");
  trainCmd->add_option("--tensorboard", to.tensorboard,
                       "Directory for a TensorBoard event file: the per-step values of --log-json as scalars");
  trainCmd->add_option("--save", to.save, "Write the training state here at the end (atomically)");
  trainCmd->add_option("--save-every", to.saveEvery, "Also write it every K steps");
  trainCmd->add_option("--resume", to.resume, "Continue from a state written by --save")->excludes(weightsOpt);
  trainCmd->add_option("--classes", to.classes, "Class count of synthetic labels (default: from the plan's loss, else 10)");
  trainCmd
      ->add_option("--mean", to.mean,
                   "Pixel normalization mean (after scaling to [0, 1]): one value, or one per channel separated by "
                   "commas (default: Fashion-MNIST's for idx, ImageNet's for folder)")
      ->delimiter(',');
  trainCmd->add_option("--std", to.std, "Pixel normalization standard deviation, as --mean")->delimiter(',');
  trainCmd->add_flag("--poison", to.poison, "Fill each tensor's arena slot with NaN after its last use");
  trainCmd->add_flag("--deterministic", to.deterministic,
                     "Bit-identical states run after run on the same GPU (deterministic cuDNN engines and "
                     "reductions; also CASTOR_DETERMINISTIC=1)");
  trainCmd
      ->add_option("--on-nonfinite", to.onNonFinite,
                   "A step with non-finite values: stop (default: end the run naming the step and the first "
                   "non-finite tensor; the last checkpoint stays) or skip (count it and go on; the plan's guard "
                   "left the state alone). A dynamic loss scaler's skipped steps never stop a run")
      ->check(CLI::IsMember({"stop", "skip"}));
  trainCmd
      ->add_option("--max-skipped-steps", to.maxSkippedSteps,
                   "End the run with an error once N of its steps were skipped (non-finite gradients, the non-finite "
                   "guard's or the loss scaler's skips): such a run is not training (default: the run's step count, "
                   "i.e. fail when every step was skipped)")
      ->check(CLI::Range(int64_t(1), std::numeric_limits<int64_t>::max()));
  trainCmd->add_option("--replicas", to.replicas,
                       "Data-parallel training: start N replicas of this command on this machine (a plan compiled "
                       "with --data-parallel; each replica takes its own batches). Under torchrun or srun, leave it "
                       "out: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT say where each process stands")
      ->check(CLI::Range(1, 1024));
  trainCmd->add_option("--replica-timeout", to.replicaTimeoutSeconds,
                       "Seconds a replica waits on another (joining, each all_reduce) before it stops naming it")
      ->check(CLI::Range(1, 86400));
  trainCmd->add_option("--grad-stats", to.gradStats,
                       "Every K steps, print the plan's grad_stats:<param> outputs (mean |g|, max |g|, non-finite "
                       "count) to stderr and the JSON log");

  castor::run::BenchOptions bo;
  auto *benchCmd = app.add_subcommand("bench", "Time a training plan on synthetic data resident on the device");
  benchCmd->add_option("plan", bo.plan, "Training plan (inputs images, labels; output loss)")->required();
  benchCmd->add_option("--steps", bo.steps, "Timed steps (the median gives img/s)");
  benchCmd->add_option("--warmup", bo.warmup, "Untimed steps first");
  benchCmd->add_option("--device", bo.device, "cuda (default) or cpu");
  benchCmd->add_option("--seed", bo.seed, "Seed of the parameter initializers and the synthetic batch");
  benchCmd->add_flag("--json", bo.json, "One JSON line");
  benchCmd->add_flag("--deterministic", bo.deterministic,
                     "Deterministic cuDNN engines and reductions, as train --deterministic (also CASTOR_DETERMINISTIC=1)");

  castor::run::EvalOptions eo;
  auto *evalCmd = app.add_subcommand("eval", "Top-1 and top-5 accuracy of a forward plan on an IDX set or an image folder");
  evalCmd->add_option("plan", eo.plan, "Forward plan (input images, output logits \"output\")")->required();
  evalCmd->add_option("--weights", eo.weights,
                      "safetensors state (parameters by name); default: the weights file the plan names");
  evalCmd->add_option("--data", eo.data,
                      "idx:DIR (the --split's files) or folder:DIR (DIR/<class>/<image>; Resize + CenterCrop)")
      ->required();
  evalCmd->add_option("--split", eo.split, "test (t10k-* files) or train");
  evalCmd->add_option("--device", eo.device, "cpu or cuda (cuda: builds with -DCASTOR_ENABLE_CUDA=ON)");
  evalCmd->add_option("--mean", eo.mean, "Pixel normalization mean (after scaling to [0, 1])")->delimiter(',');
  evalCmd->add_option("--std", eo.std, "Pixel normalization standard deviation")->delimiter(',');
  evalCmd
      ->add_option("--augment", eo.augment,
                   "Image folders: standard (Resize + CenterCrop) or none (each image resized whole to the plan's size)")
      ->check(CLI::IsMember({"standard", "none"}));
  evalCmd->add_flag("--json", eo.json, "One JSON line");

  CLI11_PARSE(app, argc, argv);
  if (*inspectCmd)
    return castor::run::inspect(inspectPath, json);
  if (*trainCmd) {
    to.commandLine.assign(argv, argv + argc);
    return castor::run::train(to);
  }
  if (*evalCmd)
    return castor::run::eval(eo);
  if (*benchCmd)
    return castor::run::bench(bo);
  return castor::run::infer(io);
}
