#!/usr/bin/env bash
# One command for the GPU machine: build everything (Release, ptxas report on), run the GPU and CPU
# tests, `fp8dsa run`, compute-sanitizer memcheck on a small case of every kernel and racecheck on
# the sparse MLA and top-k kernels, count the FP8 tensor-core instructions in each kernel's SASS,
# look for register spills, run the benchmark, and print a summary. Arguments go to the benchmark
# (e.g. scripts/gpu_check.sh --quick --ops=sparse_mla). Logs go to build/gpu_check/; when $OUT is
# set (the device tool, which brings back at most 8 files) they are also packed into
# $OUT/gpu_check_logs.tgz beside $OUT/summary.txt and $OUT/results.csv. The benchmark's CSV rows go
# to <logs>/results.csv, seeded with bench/results.csv, so that file is the repository's CSV plus
# this run. Every step has a time limit; the whole run
# stays within about 9 minutes (GPU_CHECK_BUDGET_S, default 560; a step that no longer fits is
# skipped and reported as such). GPU_CHECK_SANITIZE=0 skips the two compute-sanitizer steps.
# GPU_CHECK_PREBUILT=1 skips configure and build and runs what BUILD_DIR already holds (binaries
# built on another machine; scripts/pack_prebuilt.sh lays such a folder out).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=${BUILD_DIR:-build}
logs=$build/gpu_check
mkdir -p "$logs"
budget_s=${GPU_CHECK_BUDGET_S:-560}
start_s=$SECONDS
jobs=$(nproc)

left() { echo $((budget_s - (SECONDS - start_s))); }
# step NAME LIMIT_S CMD...: runs CMD with a time limit (capped by what is left), output to the log.
step() {
  local name=$1 limit=$2
  shift 2
  local remaining
  remaining=$(left)
  ((limit > remaining)) && limit=$remaining
  if ((limit < 10)); then
    echo "== $name: skipped (out of time)"
    echo 124 >"$logs/$name.rc"
    return 124
  fi
  echo "== $name (limit ${limit}s) -> $logs/$name.log"
  timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  echo $rc >"$logs/$name.rc"
  echo "   rc=$rc after $((SECONDS - start_s))s"
  return $rc
}

# The ptxas report comes from the compiler output, so it covers only what this run compiles:
# GPU_CHECK_CLEAN=1 rebuilds from scratch for a complete report.
fresh_build=yes
if [[ ${GPU_CHECK_CLEAN:-0} == 1 ]]; then
  rm -rf "$build"
elif [[ -f $build/CMakeCache.txt ]]; then
  fresh_build=no
fi
if [[ ${GPU_CHECK_PREBUILT:-0} == 1 ]]; then
  echo "== prebuilt binaries in $build: no configure, no build"
  [[ -f $build/build.log ]] && cp "$build/build.log" "$logs/build.log"
  echo 0 >"$logs/build.rc"
else
  step configure 60 cmake -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8DSA_PTXAS_VERBOSE=ON
  # -k 0: build every target that can be built, so one broken file does not hide the rest.
  step build 300 ninja -C "$build" -k 0 -j "$jobs"
fi
# The ptxas report of every kernel (register count, stack, spills), out of the build log.
grep -E 'ptxas info|bytes stack frame' "$logs/build.log" >"$logs/ptxas.log" 2>/dev/null || true

if [[ -x $build/fp8dsa_gpu_tests ]]; then
  step gpu_tests 260 "$build/fp8dsa_gpu_tests"
fi
if [[ -x $build/fp8dsa_cpu_tests ]]; then
  step cpu_tests 90 "$build/fp8dsa_cpu_tests"
fi
if [[ -x $build/fp8dsa ]]; then
  step fp8dsa_run 120 "$build/fp8dsa" run
fi

# compute-sanitizer on small cases. memcheck: every kernel at least once (the wgmma test GEMMs, both
# indexer scorers at D = 128 and 64 with fill_masked, every top-k path, sparse MLA at h = 8, 16, 32,
# 64 and an empty cache, the three GPU reference kernels, the whole prefill, the fused score +
# top-k). racecheck (slow: shared memory hazards): the sparse MLA kernel at h = 64 / 128, the top-k
# paths and the fused score + top-k, with the adversarial rows (all-equal, rising, NaN / inf: where
# the group select and the top-k filter's overflow raced, bench/journal/2026-12-04.md, sixteenth
# session).
memcheck_filter='WgmmaE4m3Gemm.*:IndexerFastGpu.CausalWithCachePrefix:IndexerFastGpu.HeadDim64EveryHeadCount'
memcheck_filter+=':IndexerReferenceGpu.CausalAndFillMasked:TopkGpuSmall.EveryPathSmallRows'
memcheck_filter+=':TopkReferenceGpu.PageTableTransform:SparseMlaFp8.SpecShapesH64:SparseMlaFp8.SmallHeadCounts'
memcheck_filter+=':SparseMlaFp8.EmptyCacheAndZeroTokens:SparseMlaReferenceGpu.SingleAndDuplicateKeyHandComputed'
memcheck_filter+=':PrefillGpu.MatchesCpuReferencesStageByStage:FusedTopkGpu.PageTable:FusedTopkGpu.RejectsSmallWorkspace'
racecheck_filter='SparseMlaFp8.SingleKeyHandComputed:SparseMlaFp8.EmptyCacheAndZeroTokens'
racecheck_filter+=':SparseMlaFp8.TopkLengthOutsideRangeIsClamped:TopkGpuSmall.EveryPathSmallRows'
racecheck_filter+=':FusedTopkGpu.PageTable:TopkGpu.AdversarialRows:FusedTopkGpu.AdversarialRows'
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [[ ${GPU_CHECK_SANITIZE:-1} != 0 && -x $build/fp8dsa_gpu_tests ]]; then
  if [[ -x $sanitizer ]]; then
    step memcheck 180 "$sanitizer" --tool memcheck --error-exitcode 1 "$build/fp8dsa_gpu_tests" \
      --gtest_filter="$memcheck_filter"
    step racecheck 200 "$sanitizer" --tool racecheck --error-exitcode 1 "$build/fp8dsa_gpu_tests" \
      --gtest_filter="$racecheck_filter"
  else
    echo "== compute-sanitizer not found: memcheck and racecheck not run"
  fi
fi

# FP8 (QGMMA) and BF16/F16 (HGMMA) warpgroup MMA instructions per kernel of each stage library.
sass_table=$logs/sass_mma_counts.txt
: >"$sass_table"
demangle=cat
command -v cu++filt >/dev/null 2>&1 && demangle=cu++filt
command -v c++filt >/dev/null 2>&1 && [[ $demangle == cat ]] && demangle=c++filt
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for lib in "$build"/src/*/libfp8dsa_*.a; do
  [[ -f $lib && -x $cuobjdump ]] || continue
  "$cuobjdump" --dump-sass "$lib" 2>/dev/null |
    awk -v lib="$(basename "$lib")" '
      /Function : / { fn = $NF; q[fn] += 0; h[fn] += 0; next }
      /QGMMA/ { q[fn]++ } /HGMMA/ { h[fn]++ }
      END { for (f in q) printf "%s\t%d\t%d\t%s\n", lib, q[f], h[f], f }' |
    sort -t$'\t' -k1,1 -k2,2nr
done | while IFS=$'\t' read -r lib qgmma hgmma fn; do
  printf "%-28s %6s %6s  %s\n" "$lib" "$qgmma" "$hgmma" "$(echo "$fn" | $demangle | cut -c1-110)"
done >"$sass_table"
[[ -x $cuobjdump ]] || echo "(cuobjdump not found: no SASS counts)" >"$sass_table"

# Kernels whose ptxas report shows spill stores or loads.
spills=$logs/spills.txt
awk '/Function properties for/ { fn = $NF }
     /spill stores/ { if ($5 + 0 > 0 || $9 + 0 > 0) print fn ": " $0 }' "$logs/ptxas.log" |
  sort -u | $demangle | cut -c1-200 >"$spills"

csv=$logs/results.csv
[[ -f bench/results.csv && ! -f $csv ]] && cp bench/results.csv "$csv"
if [[ -x $build/bench/fp8dsa_bench ]]; then
  step bench 300 "$build/bench/fp8dsa_bench" --csv="$csv" "$@"
fi

# ---------------------------------------------------------------------------------------------
rc_of() { [[ -f $logs/$1.rc ]] && cat "$logs/$1.rc" || echo "not run"; }
gtest_counts() {
  local log=$logs/$1.log
  [[ -f $log ]] || { echo "not run"; return; }
  local passed failed skipped
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  failed=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' || true)
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$log" | grep -oE '[0-9]+' || true)
  echo "passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0} (rc $(rc_of "$1"))"
}

summary() {
echo
echo "================================ gpu_check summary ================================"
echo "elapsed            $((SECONDS - start_s)) s; logs in $logs"
echo "build              rc $(rc_of build)$(grep -c 'FAILED:' "$logs/build.log" 2>/dev/null | sed 's/^/, failed targets: /')"
echo "gpu tests          $(gtest_counts gpu_tests)"
grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/gpu_tests.log" 2>/dev/null | sort -u | head -20 | sed 's/^/                   /'
echo "cpu tests          $(gtest_counts cpu_tests)"
grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/cpu_tests.log" 2>/dev/null | sort -u | head -20 | sed 's/^/                   /'
echo "fp8dsa run         rc $(rc_of fp8dsa_run)"
for tool in memcheck racecheck; do
  # compute-sanitizer's own verdict: "ERROR SUMMARY: n errors" / "RACECHECK SUMMARY: n hazards ...".
  verdict=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$logs/$tool.log" 2>/dev/null | tail -1 | sed 's/^=* *//')
  printf '%-18s %s%s\n' "$tool" "$(gtest_counts $tool)" "${verdict:+; $verdict}"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/$tool.log" 2>/dev/null | sort -u | head -10 | sed 's/^/                   /'
done
if [[ -f $logs/fp8dsa_run.log ]]; then
  sed -n '/^stage /,$p' "$logs/fp8dsa_run.log" | sed 's/^/  /'
fi
echo
echo "warpgroup MMAs in SASS (library, QGMMA, HGMMA, kernel):"
if [[ -s $sass_table ]]; then sed 's/^/  /' "$sass_table"; else echo "  (no device code found)"; fi
echo
if [[ -s $spills ]]; then
  echo "register spills (ptxas):"
  sed 's/^/  /' "$spills"
else
  echo "register spills (ptxas): none"
fi
[[ $fresh_build == yes ]] || echo "(incremental build: the ptxas report covers only what was recompiled; GPU_CHECK_CLEAN=1 for all)"
echo
echo "benchmark          rc $(rc_of bench)"
if [[ -f $logs/bench.log ]]; then
  if grep -q '^all rows:' "$logs/bench.log"; then
    sed -n '/^all rows:/,$p' "$logs/bench.log" | sed 's/^/  /'
  else  # cut short: the per-op tables printed so far
    sed -n '/^op /,$p' "$logs/bench.log" | sed 's/^/  /'
  fi
  grep -E 'failed|error' "$logs/bench.log" | head -5 | sed 's/^/  /'
fi
}
summary | tee "$logs/summary.txt"
if [[ -n ${OUT:-} ]]; then
  cp "$logs/summary.txt" "$OUT/summary.txt"
  [[ -f $csv ]] && cp "$csv" "$OUT/results.csv"
  tar czf "$OUT/gpu_check_logs.tgz" -C "$build" gpu_check
fi

status=0
for s in build gpu_tests cpu_tests fp8dsa_run memcheck racecheck bench; do
  r=$(rc_of $s)
  [[ $r == "not run" || $r == 0 ]] || status=1
done
exit $status
