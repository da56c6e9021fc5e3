#!/usr/bin/env bash
# Installs every dependency of Castor through the package managers (Debian's apt and PyPI).
# Idempotent: running it again installs nothing new. See README.md for what each one is for.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

DEBIAN_PACKAGES=(
  cmake ninja-build g++ pkg-config
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libprotobuf-dev protobuf-compiler
  libonnx-dev libonnx-testdata
  libfmt-dev catch2 libcli11-dev
  zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev libxml2-dev
  dataset-fashion-mnist
  libturbojpeg0-dev libpng-dev libssl-dev
)

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
# Versions that ship cp311 wheels.
$PY -m pip install -q --disable-pip-version-check \
  "onnx==1.17.0" "numpy==1.26.4" "onnxruntime==1.20.1" "protobuf==5.29.3" "matplotlib==3.9.2" "tensorboard==2.18.0" "pillow==13.0.0"
# The cuDNN frontend is header-only C++; its declared dependencies serve its Python DSL only.
$PY -m pip install -q --disable-pip-version-check --no-deps "nvidia-cudnn-frontend==1.18.0"
# nvJPEG, the CUDA backend's image decoder (the GPU's hardware JPEG decoder): header and library.
$PY -m pip install -q --disable-pip-version-check --no-deps "nvidia-nvjpeg==13.0.2.28"
