#include "stage_table.h"

#include <algorithm>
#include <cstdio>

namespace fp8dsa::cli {

namespace {

void print_stage_table(const std::vector<StageRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"stage", "kernel", "ms", "TFLOPS", "check"});
  for (const StageRow& r : rows) {
    char ms[32] = "-", tflops[32] = "-";
    if (!std::isnan(r.ms)) std::snprintf(ms, sizeof(ms), "%.3f", r.ms);
    if (!std::isnan(r.ms) && !std::isnan(r.flops) && r.ms > 0) {
      std::snprintf(tflops, sizeof(tflops), "%.3g", r.flops / (r.ms * 1e-3) / 1e12);
    }
    std::string check = r.check.ran ? r.check.summary : "-";
    if (std::isnan(r.ms)) check = r.note;
    cells.push_back({r.stage, r.kernel, ms, tflops, check});
  }
  std::vector<size_t> width(5, 0);
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (size_t r = 0; r < cells.size(); ++r) {
    const auto& c = cells[r];
    std::printf("%-*s  %-*s  %*s  %*s  %s\n", int(width[0]), c[0].c_str(), int(width[1]), c[1].c_str(),
                int(width[2]), c[2].c_str(), int(width[3]), c[3].c_str(), c[4].c_str());
    if (r == 0) {
      size_t total = 8;
      for (size_t w : width) total += w;
      std::printf("%s\n", std::string(total, '-').c_str());
    }
  }
}

bool report_failures(const std::vector<StageRow>& rows) {
  bool ok = true;
  for (const StageRow& r : rows) {
    if (r.check.ran && !r.check.passed) {
      std::printf("\n%s check failed:\n%s\n", r.stage.c_str(), r.check.detail.c_str());
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int print_stage_report(const std::vector<StageRow>& rows) {
  std::printf("\n");
  print_stage_table(rows);
  const bool ok = report_failures(rows);
  std::printf("\n%s\n", ok ? "all checks passed" : "some checks FAILED");
  return ok ? 0 : 1;
}

}  // namespace fp8dsa::cli
