# Sourced by the scripts that run on the GPU machine, from the repository root: the libraries
# scripts/build_gpu.sh carries in gpu-carry/lib, cuDNN, NCCL and the CUDA runtime from PyTorch's wheels
# there, and a tuning cache kept for the whole device call.
carry=gpu-carry
# A packed carry (scripts/pack_gpu_carry.sh) replaces gpu-carry/ unless it was unpacked there already.
if [ -f gpu-carry-packed/carry.tar.xz ]; then
  packed="$(cksum <gpu-carry-packed/carry.tar.xz)"
  if [ "$(cat "$carry/.packed" 2>/dev/null)" != "$packed" ]; then
    rm -rf "$carry" && mkdir -p "$carry" && tar -C "$carry" -xJf gpu-carry-packed/carry.tar.xz
    echo "$packed" >"$carry/.packed"
  fi
fi
bin="$carry/bin"
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$PWD/$carry/lib:$site/cudnn/lib:$site/cu13/lib:$site/nccl/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE="${CASTOR_TUNING_CACHE:-/tmp/castor-tuning}"
mkdir -p "$CASTOR_TUNING_CACHE"
