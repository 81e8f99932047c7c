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

void print_stage_table(const std::vector<StageRow>& rows);

// Prints the full description of every failed check; returns true when every check that ran passed.
bool report_failures(const std::vector<StageRow>& rows);

}  // namespace fp8dsa::cli
