#!/usr/bin/env bash
# Runtime-only build with the CUDA backend (no MLIR), for carrying to the GPU machine:
# stripped castor-run and castor_cuda_tests in gpu-carry/bin, and, when the compiler is built
# (build/bin/castor), the GPU test plans in gpu-carry/plans (a small CNN's and a miniature ViT
# block's training steps in fp32, fp16 and bf16). gpu-carry/ is git-ignored (add "/gpu-carry/" to .git/info/exclude).
#
#   scripts/build_gpu.sh            # BUILD_DIR=build-gpu, CUDA_ARCHS=90 (the H200)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build-gpu}"
archs="${CUDA_ARCHS:-90}"
carry="$root/gpu-carry"

cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCASTOR_ENABLE_COMPILER=OFF \
  -DCASTOR_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs"
ninja -C "$build" -j"${JOBS:-2}" castor-run castor_cuda_tests castor_cuda_kernel_tests castor_conv_tests castor-bn-bench castor_grouped_conv_tests \
  castor_depthwise_conv_tests castor-dwconv-bench castor-ln-bench

mkdir -p "$carry/bin" "$carry/plans" "$carry/lib"
for b in castor-run castor_cuda_tests castor_cuda_kernel_tests castor_conv_tests castor-bn-bench castor_grouped_conv_tests \
  castor_depthwise_conv_tests castor-dwconv-bench castor-ln-bench; do
  strip -o "$carry/bin/$b" "$build/bin/$b"
done
# The Debian libraries castor-run links that the GPU machine lacks (it has the CUDA ones).
for l in libfmt.so.9 libprotobuf.so.32 libturbojpeg.so.0 libpng16.so.16; do
  cp -L "/usr/lib/x86_64-linux-gnu/$l" "$carry/lib/"
done
# nvJPEG, from the PyPI package the build found (CMake's cache says where).
nvjpeg="$(sed -n 's/^CASTOR_NVJPEG_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")"
if [ -n "$nvjpeg" ] && [ -f "$nvjpeg" ]; then
  cp -L "$nvjpeg" "$carry/lib/"
fi

castor="$root/build/bin/castor"
if [ -x "$castor" ]; then
  python3 "$root/models/resnet.py" --arch tiny --weights none --image-size 32 --num-classes 10 \
    -o "$carry/plans/tiny.onnx" >/dev/null
  for p in fp32 fp16 bf16; do
    "$castor" compile "$carry/plans/tiny.onnx" --init kaiming --batch 16 --train --precision "$p" \
      --optimizer adamw --lr 1e-4 --emit-gradients -o "$carry/plans/tiny_${p}_adamw.plan" >/dev/null
  done
  # The same steps with recompute (castor-recompute): every cheap value; in fp16 and bf16 also a
  # budget just below the cheap plan's planned peak, which only recomputing convolutions meets.
  for p in fp32 fp16 bf16; do
    "$castor" compile "$carry/plans/tiny.onnx" --init kaiming --batch 16 --train --precision "$p" \
      --optimizer adamw --lr 1e-4 --emit-gradients --recompute cheap -o "$carry/plans/tiny_${p}_adamw_cheap.plan" \
      --report "$carry/plans/cheap_report" >/dev/null
    peak=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['predicted_peak_bytes'] - 1)" \
      "$carry/plans/cheap_report/memory.json")
    rm -rf "$carry/plans/cheap_report"
    [ "$p" = fp32 ] && continue
    "$castor" compile "$carry/plans/tiny.onnx" --init kaiming --batch 16 --train --precision "$p" \
      --optimizer adamw --lr 1e-4 --emit-gradients --recompute auto --memory-budget "$peak" \
      -o "$carry/plans/tiny_${p}_adamw_auto.plan" >/dev/null
  done
  # A miniature ViT block (layer norm, attention, GELU, drop path) in each precision.
  python3 "$root/test/cuda/make_tiny_transformer.py" "$carry/plans/tiny_transformer.onnx"
  for p in fp32 fp16 bf16; do
    "$castor" compile "$carry/plans/tiny_transformer.onnx" --init kaiming --train --precision "$p" --optimizer adamw --lr 1e-3 \
      --emit-gradients -o "$carry/plans/tiny_transformer_${p}_adamw.plan" >/dev/null
  done
  # The same block with 16-wide heads: fp16 and bf16 steps fuse its attention (cuDNN's fused
  # attention on the GPU).
  python3 "$root/test/cuda/make_tiny_transformer.py" "$carry/plans/tiny_attention.onnx" --dim 32
  for p in fp16 bf16; do
    "$castor" compile "$carry/plans/tiny_attention.onnx" --init kaiming --train --precision "$p" --optimizer adamw --lr 1e-3 \
      --emit-gradients -o "$carry/plans/tiny_attention_${p}_adamw.plan" >/dev/null
  done
  # The tiny fp16 step compiled for data-parallel training (all_reduce kernels): one replica on
  # one GPU runs it as the plan without them; several replicas run it through NCCL.
  "$castor" compile "$carry/plans/tiny.onnx" --init kaiming --batch 16 --train --precision fp16 --optimizer adamw \
    --lr 1e-4 --data-parallel -o "$carry/plans/tiny_fp16_adamw_dp.plan" >/dev/null
  # The tiny model with ReLU6 activations (Clip(0, 6)): its batch-norm groups fuse with clip_max;
  # with --recompute cheap their outputs come back as batch_norm_apply with clip_max.
  python3 "$root/models/resnet.py" --arch tiny --activation relu6 --weights none --image-size 32 --num-classes 10 \
    -o "$carry/plans/tiny_relu6.onnx" >/dev/null
  for p in fp16 bf16; do
    "$castor" compile "$carry/plans/tiny_relu6.onnx" --init kaiming --batch 16 --train --precision "$p" \
      --optimizer adamw --lr 1e-4 --emit-gradients -o "$carry/plans/tiny_relu6_${p}_adamw.plan" >/dev/null
    "$castor" compile "$carry/plans/tiny_relu6.onnx" --init kaiming --batch 16 --train --precision "$p" \
      --optimizer adamw --lr 1e-4 --emit-gradients --recompute cheap -o "$carry/plans/tiny_relu6_${p}_adamw_cheap.plan" >/dev/null
  done
  # The tiny model with SiLU activations (x * Sigmoid(x)): castor-recompute-elementwise computes
  # the sigmoid and the product again inside the backward's generated kernels.
  python3 "$root/models/resnet.py" --arch tiny --activation silu --weights none --image-size 32 --num-classes 10 \
    -o "$carry/plans/tiny_silu.onnx" >/dev/null
  for p in fp16 bf16; do
    "$castor" compile "$carry/plans/tiny_silu.onnx" --init kaiming --batch 16 --train --precision "$p" \
      --optimizer adamw --lr 1e-4 --emit-gradients -o "$carry/plans/tiny_silu_${p}_adamw.plan" >/dev/null
  done
  # Gradients as outputs (compared directly), SGD with momentum, gradient clipping.
  "$castor" compile "$carry/plans/tiny.onnx" --init kaiming --batch 16 --train --precision fp32 \
    --optimizer sgd --momentum 0.9 --emit-gradients -o "$carry/plans/tiny_fp32_sgd_grads.plan" >/dev/null
  "$castor" compile "$carry/plans/tiny.onnx" --init kaiming --batch 16 --train --precision fp16 \
    --optimizer sgd --momentum 0.9 --nesterov --clip-grad-norm 1.0 --emit-gradients \
    -o "$carry/plans/tiny_fp16_sgd_clip.plan" >/dev/null
  # ResNet-50's training steps for bench/device_call.sh, as torch_resnet50.py trains:
  # batch 256, AdamW lr 1e-3, weight decay 0.01 (the plans only: weights come from the seed).
  for p in fp16 bf16 fp32; do
    "$castor" compile "$root/models/resnet50.onnx" --init kaiming --batch 256 --train --precision "$p" \
      --optimizer adamw --lr 1e-3 --weight-decay 0.01 -o "$carry/plans/r50_${p}_b256.plan" >/dev/null
  done
  # The fp16 step for data-parallel runs (bench/data_parallel_gpu.sh): batch 256 per GPU.
  "$castor" compile "$root/models/resnet50.onnx" --init kaiming --batch 256 --train --precision fp16 \
    --optimizer adamw --lr 1e-3 --weight-decay 0.01 --data-parallel -o "$carry/plans/r50_fp16_b256_dp.plan" >/dev/null
  # The same fp16 and bf16 steps unfused, for the fused-vs-unfused comparison of gpu_acceptance.sh.
  for p in fp16 bf16; do
    "$castor" compile "$root/models/resnet50.onnx" --init kaiming --batch 256 --train --precision "$p" \
      --optimizer adamw --lr 1e-3 --weight-decay 0.01 --fuse none -o "$carry/plans/r50_${p}_b256_nofuse.plan" >/dev/null
  done
  # Beyond CNNs, for bench/device_call.sh --models ... --batch 128 (AdamW lr 1e-3, as
  # bench/torch_torchvision.py trains) and the ViT loss comparison (lr 1e-4, run_amp_comparison.sh
  # with MODEL=vit_b_16): the training-mode fixtures, seeded.
  for m in vit_b_16 convnext_tiny efficientnet_b0 swin_t; do
    for p in fp16 bf16; do
      "$castor" compile "$root/test/fixtures/torchvision/${m}_train.onnx" --init kaiming --batch 128 --train \
        --precision "$p" --optimizer adamw --lr 1e-3 --weight-decay 0.01 -o "$carry/plans/${m}_${p}_b128.plan" >/dev/null
    done
  done
  for p in fp16 bf16; do
    "$castor" compile "$root/test/fixtures/torchvision/vit_b_16_train.onnx" --init kaiming --batch 128 --train \
      --precision "$p" --optimizer adamw --lr 1e-4 --weight-decay 0.01 -o "$carry/plans/vit_b_16_${p}_b128_cmp.plan" >/dev/null
  done
  # ViT-B/16 with its attention unfused (matmul, softmax, matmul), to measure what fusing it gives.
  "$castor" compile "$root/test/fixtures/torchvision/vit_b_16_train.onnx" --init kaiming --batch 128 --train \
    --precision fp16 --optimizer adamw --lr 1e-3 --weight-decay 0.01 --fuse none -o "$carry/plans/vit_b_16_fp16_b128_nofuse.plan" >/dev/null
  # The 100-step loss comparison against PyTorch AMP (test/torch_reference/run_amp_comparison.sh).
  "$castor" compile "$root/models/resnet50.onnx" --init kaiming --batch 64 --train --precision fp16 \
    --optimizer adamw --lr 1e-4 --beta1 0.9 --beta2 0.999 --eps 1e-8 --weight-decay 0.01 --loss-scale dynamic \
    -o "$carry/plans/r50_fp16_b64_cmp.plan" >/dev/null
  # CNNs with grouped and depthwise convolutions and concatenations, fused and unfused
  # (bench/device_call.sh --models "..." --batch 128 --fuse "auto none").
  for m in resnext50_32x4d mobilenet_v2 densenet121; do
    for f in auto none; do
      suffix=$([ "$f" = none ] && echo _nofuse || true)
      "$castor" compile "$root/test/fixtures/torchvision/${m}_train.onnx" --init kaiming --batch 128 --train \
        --precision fp16 --optimizer adamw --lr 1e-3 --weight-decay 0.01 --fuse "$f" \
        -o "$carry/plans/${m}_fp16_b128${suffix}.plan" >/dev/null
    done
  done
  # EfficientNet-B0 with the pattern fusions alone (no generated kernels): the plan before them,
  # for the launches and time they save.
  "$castor" compile "$root/test/fixtures/torchvision/efficientnet_b0_train.onnx" --init kaiming --batch 128 --train \
    --precision fp16 --optimizer adamw --lr 1e-3 --weight-decay 0.01 --fuse patterns \
    -o "$carry/plans/efficientnet_b0_fp16_b128_patterns.plan" >/dev/null
  cp "$root/../shared/bench/torch_resnet50.py" "$carry/" 2>/dev/null || true
fi
ls -la "$carry/bin" "$carry/plans"
