#!/usr/bin/env bash
# For the GPU machine: builds the sparse MLA GPU tests and runs the native FP8 kernel's tests one by
# one, each under a time limit (a pipeline bug then fails one test instead of hanging the binary),
# then memcheck on the smallest case and its timing driver. Logs go to $OUT when set, else
# build/mla_check/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${BUILD_DIR:-build}
logs=${OUT:-$build/mla_check}
mkdir -p "$logs"

cmake -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8DSA_PTXAS_VERBOSE=ON >"$logs/cmake.log" 2>&1 &&
  ninja -C "$build" fp8dsa_sparse_mla_gpu_tests fp8dsa_sparse_mla_timing >"$logs/build.log" 2>&1 ||
  { tail -30 "$logs/build.log"; exit 1; }
echo "ptxas (registers / spills) of the FP8 kernels:"
grep -A3 -E "Compiling entry function '_ZN6fp8dsa10sparse_mla(25sparse_mla_heads64|29sparse_mla_small_heads)_kernel" \
  "$logs/build.log" |
  grep -E "registers|spill" | sort | uniq -c
if command -v cuobjdump >/dev/null; then
  echo "setmaxnreg in SASS:"
  cuobjdump -sass "$build/src/sparse_mla/libfp8dsa_sparse_mla.a" | grep -oE "USETMAXREG[^;]*" | sort | uniq -c
fi

tests=$build/tests/sparse_mla/fp8dsa_sparse_mla_gpu_tests
for t in SingleKeyHandComputed EmptyCacheAndZeroTokens SpecShapesH64 SpecShapesH128 HardNumerics SmallHeadCounts \
         RealisticScoresSmall RejectsBadArguments LargeH64 LargeH128 LargeH16 SmallHeadsTransposedAndPadded \
         QkChainsAccuracy; do
  timeout 150 "$tests" --gtest_filter="SparseMlaFp8.$t" >"$logs/$t.log" 2>&1
  echo "SparseMlaFp8.$t rc=$?"
  grep -E "^\[  FAILED  \]|rel L2|lse" "$logs/$t.log" | head -4 | sed 's/^/    /'
done
timeout 120 compute-sanitizer --tool memcheck "$tests" \
  --gtest_filter='SparseMlaFp8.SpecShapesH64:SparseMlaFp8.SmallHeadCounts:SparseMlaFp8.EmptyCacheAndZeroTokens' \
  >"$logs/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -2 "$logs/memcheck.log" | sed 's/^/    /'
timeout 150 compute-sanitizer --tool racecheck "$tests" \
  --gtest_filter='SparseMlaFp8.SingleKeyHandComputed:SparseMlaFp8.EmptyCacheAndZeroTokens' >"$logs/racecheck.log" 2>&1
echo "racecheck rc=$?"; tail -2 "$logs/racecheck.log" | sed 's/^/    /'
timeout 120 "$build/bench/fp8dsa_sparse_mla_timing" 10 >"$logs/timing.log" 2>&1
echo "timing rc=$?"; tail -25 "$logs/timing.log"
