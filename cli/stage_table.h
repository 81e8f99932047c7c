// The CLI's per-stage table: stage, kernel, ms, TFLOPS, check.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "checks.h"

namespace fp8dsa::cli {

// The label a stage shows when it ran on a plain CUDA-core reference kernel instead of its fast one.
inline constexpr const char* kGpuReferenceLabel = "reference (CUDA cores)";

struct StageRow {
  std::string stage;
  std::string kernel;
  double ms = NAN;     // NaN: did not run (see note)
  double flops = NAN;  // valid-work FLOPs; NaN for the top-k
  CheckOutcome check;
  std::string note;
};

// The end of a run: the table, the full description of every failed check and the verdict line.
// Returns the command's exit status: 0 when every check that ran passed, else 1.
int print_stage_report(const std::vector<StageRow>& rows);

}  // namespace fp8dsa::cli
