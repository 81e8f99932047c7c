#!/usr/bin/env bash
# Builds sgl_topk from the kernel sources in the PyPI wheel sglang==0.5.23.
#
#   bench/anchors/build_sgl_topk.sh [SGLANG_WHEEL] [TVM_FFI_WHEEL]
#
# A measuring instrument, not part of the library: our host code (sgl_topk.cu, beside this script)
# around SGLang's kernel headers, extracted from the wheel at build time (nothing of theirs is kept
# in this repository). fp8dsa_bench --sgl-topk=PATH runs it (bench/anchors/SGL_TOPK.md).
#
# SGLANG_WHEEL   default /tmp/sglang/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
#                (get it with: python3 -m pip download --no-deps sglang==0.5.23 -d /tmp/sglang)
# TVM_FFI_WHEEL  default: the apache_tvm_ffi-0.1.11-*.whl beside SGLANG_WHEEL, downloaded there with pip
#                if missing (sglang 0.5.23 pins apache-tvm-ffi==0.1.11). Only its headers are used.
#
# Output: $OUT_DIR/sgl_topk (default: the checkout's .anchors/, which the device tool carries; sm_90a,
# static cudart). Everything extracted goes under $BUILD_DIR (default /tmp/sgl_topk_build), wiped
# first, so the build is the same from a clean folder.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT_DIR="${OUT_DIR:-$HERE/../../.anchors}"
BUILD_DIR="${BUILD_DIR:-/tmp/sgl_topk_build}"
SGLANG_VERSION=0.5.23
TVM_FFI_VERSION=0.1.11
WHEEL="${1:-/tmp/sglang/sglang-${SGLANG_VERSION}-cp311-cp311-manylinux_2_34_x86_64.whl}"
WHEEL_DIR="$(dirname "$WHEEL")"
TVM_WHEEL="${2:-}"

if [[ ! -f "$WHEEL" ]]; then
  echo "error: sglang wheel not found: $WHEEL" >&2
  echo "  python3 -m pip download --no-deps sglang==${SGLANG_VERSION} -d $WHEEL_DIR" >&2
  exit 1
fi
if [[ -z "$TVM_WHEEL" ]]; then
  TVM_WHEEL="$(ls "$WHEEL_DIR"/apache_tvm_ffi-${TVM_FFI_VERSION}-*.whl 2>/dev/null | head -n1 || true)"
  if [[ -z "$TVM_WHEEL" ]]; then
    python3 -m pip download --no-deps "apache-tvm-ffi==${TVM_FFI_VERSION}" -d "$WHEEL_DIR"
    TVM_WHEEL="$(ls "$WHEEL_DIR"/apache_tvm_ffi-${TVM_FFI_VERSION}-*.whl | head -n1)"
  fi
fi

mkdir -p "$OUT_DIR" "$BUILD_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
cd "$BUILD_DIR"
rm -rf src tvmffi
mkdir -p src tvmffi
# Kernel sources + headers (and the Python that documents how SGLang calls them).
unzip -q "$WHEEL" -d src \
  'sglang/kernels/jit/*' \
  'sglang/srt/layers/attention/dsa/*' \
  'sglang/kernels/ops/attention/*' \
  "sglang-${SGLANG_VERSION}.dist-info/*"
grep -q "^Version: ${SGLANG_VERSION}\$" "src/sglang-${SGLANG_VERSION}.dist-info/METADATA" \
  || { echo "error: $WHEEL is not sglang ${SGLANG_VERSION}" >&2; exit 1; }
# tvm-ffi headers only (the kernel headers include them; nothing from its runtime is linked).
unzip -q "$TVM_WHEEL" -d tvmffi 'tvm_ffi/include/*' "apache_tvm_ffi-${TVM_FFI_VERSION}.dist-info/*"

JIT="src/sglang/kernels/jit"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"

# SGLang's own JIT flags for a Hopper GPU (sglang/kernels/jit/utils: toolchain.base_cuda_flags,
# toolchain.target_flags, arch.get_default_target_flags), then static cudart for a standalone binary.
# topk_v2's -DSGL_TOPK_V2_MAX_C{8,16}_OCC* probes only size the cluster (decode) kernels, which this
# tool never launches; the header defaults are kept.
SGL_FLAGS=(-Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -DSGL_CUDA_ARCH=900 -std=c++20 -O3
           --expt-relaxed-constexpr)
EXTRA_FLAGS=(-cudart static)
FLAGS_STR="${SGL_FLAGS[*]} ${EXTRA_FLAGS[*]}"

"$NVCC" "${SGL_FLAGS[@]}" "${EXTRA_FLAGS[@]}" \
  -I "$JIT/include" -I "$JIT/csrc" -I tvmffi/tvm_ffi/include \
  -DSGL_TOPK_SGLANG_VERSION="\"${SGLANG_VERSION}\"" \
  -DSGL_TOPK_TVM_FFI_VERSION="\"${TVM_FFI_VERSION}\"" \
  -DSGL_TOPK_NVCC_FLAGS="\"${FLAGS_STR}\"" \
  -o "$OUT_DIR/sgl_topk" "$HERE/sgl_topk.cu"

echo "built $OUT_DIR/sgl_topk with: $NVCC $FLAGS_STR"
