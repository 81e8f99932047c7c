#!/usr/bin/env bash
# Installs what building and testing fp8dsa needs and is missing here (cmake, ninja, g++, GoogleTest)
# through apt-get, then checks for the CUDA toolkit (nvcc), which it does not install.
# Idempotent: with everything present it changes nothing and needs no network or root.
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
dpkg -s libgtest-dev >/dev/null 2>&1 || missing+=(libgtest-dev)

if ((${#missing[@]} > 0)); then
  echo "setup.sh: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo_cmd=(sudo)
    else
      echo "setup.sh: need root (or sudo) to apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

nvcc_path=$(command -v nvcc 2>/dev/null || true)
if [[ -z $nvcc_path && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc_path=/usr/local/cuda/bin/nvcc
fi
if [[ -z $nvcc_path ]]; then
  cat >&2 <<'MSG'
setup.sh: nvcc (the CUDA toolkit, 12.4 or newer for sm_90a) was not found.
  Install it from https://developer.nvidia.com/cuda-downloads (e.g. apt-get install cuda-toolkit-13-0
  after adding NVIDIA's apt repository), then put its bin/ on PATH or set CUDACXX=/usr/local/cuda/bin/nvcc.
MSG
  exit 1
fi
if ! command -v nvcc >/dev/null 2>&1 && [[ -z ${CUDACXX:-} ]]; then
  echo "setup.sh: note: nvcc is at $nvcc_path but not on PATH; if CMake does not find it," \
    "export CUDACXX=$nvcc_path"
fi
echo "setup.sh: ok (cmake, ninja, g++, GoogleTest, $($nvcc_path --version | tail -n 1))"
