#!/usr/bin/env bash
# Installs what building and testing fp8dsa needs and is missing here: cmake, ninja, g++, GoogleTest
# (and python3 with its headers, if there is none) through apt-get; the Python package's build and
# test requirements (numpy, pytest, nanobind, scikit-build-core, ml_dtypes) through
# `python3 -m pip install` into the python3 on PATH (a pyenv Python, an active venv, ...). Then
# checks for the CUDA toolkit (nvcc), which it does not install.
# Idempotent: with everything present it changes nothing and needs no network or root.
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
dpkg -s libgtest-dev >/dev/null 2>&1 || missing+=(libgtest-dev)
# The extension needs Python.h; pip comes with every python3 but Debian's.
if ! command -v python3 >/dev/null 2>&1; then
  missing+=(python3 python3-dev python3-pip)
elif ! python3 -c 'import os, sysconfig
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
  missing+=(python3-dev)
fi

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

# The package is installed with --no-build-isolation (no network at install time), so its build
# requirements live here too; the minimum versions are those of pyproject.toml.
python_missing=$(python3 - <<'PY'
import importlib.metadata as metadata
required = {"numpy": None, "pytest": None, "nanobind": (2, 2), "scikit-build-core": (0, 10),
            "ml_dtypes": None}
for name, minimum in required.items():
    try:
        version = tuple(int(part) for part in metadata.version(name).split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        version = None
    if version is None or (minimum and version < minimum):
        print(f"{name}>={'.'.join(map(str, minimum))}" if minimum else name)
PY
)
if [[ -n $python_missing ]]; then
  # shellcheck disable=SC2086
  echo "setup.sh: python3 -m pip install" $python_missing
  # shellcheck disable=SC2086
  if ! python3 -m pip install $python_missing; then
    cat >&2 <<'MSG'
setup.sh: pip could not install into this python3 (an "externally managed" system Python?).
  Create and activate a virtual environment, then run setup.sh again:
    python3 -m venv .venv && . .venv/bin/activate
MSG
    exit 1
  fi
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
echo "setup.sh: ok (cmake, ninja, g++, GoogleTest, $(python3 --version)," \
  "numpy pytest nanobind scikit-build-core ml_dtypes, $($nvcc_path --version | tail -n 1))"
