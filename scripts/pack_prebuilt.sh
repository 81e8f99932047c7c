#!/usr/bin/env bash
# Lays out the binaries scripts/gpu_check.sh runs, built here, in one folder to carry to a GPU
# machine (the device tool carries at most 64 MiB): the test binaries, the CLI, the benchmark, the
# stage libraries (for the SASS counts) and a ptxas report of a full rebuild of the stage libraries.
#   scripts/pack_prebuilt.sh [build dir=build] [destination=.carry/build]
# then, on the GPU machine: GPU_CHECK_PREBUILT=1 BUILD_DIR=.carry/build scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
dest=${2:-.carry/build}
ninja -C "$build" fp8dsa fp8dsa_cpu_tests fp8dsa_gpu_tests bench/fp8dsa_bench >/dev/null
rm -rf "$dest"
mkdir -p "$dest/bench"
cp "$build/fp8dsa" "$build/fp8dsa_cpu_tests" "$build/fp8dsa_gpu_tests" "$dest/"
cp "$build/bench/fp8dsa_bench" "$dest/bench/"
for lib in "$build"/src/*/libfp8dsa_*.a; do
  folder=$(basename "$(dirname "$lib")")
  mkdir -p "$dest/src/$folder"
  cp "$lib" "$dest/src/$folder/"
done
# The ptxas report comes from compiler output: rebuild the kernel libraries to capture it.
libs=()
for lib in "$build"/src/*/libfp8dsa_*.a; do libs+=("src/$(basename "$(dirname "$lib")")/$(basename "$lib")"); done
ninja -C "$build" -t clean "${libs[@]}" >/dev/null
ninja -C "$build" "${libs[@]}" >"$dest/build.log" 2>&1
du -sh "$dest"
