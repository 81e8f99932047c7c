// The benchmark's output: a table on stdout and rows appended to bench/results.csv
// (date,gpu,op,shape,ms,tflops,ratio_to_fp8_gemm,commit).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "fp8dsa/status.h"

namespace fp8dsa::bench {

struct ResultRow {
  std::string op;      // indexer | topk | fused_topk | sparse_mla | pipeline (fp8_gemm: table only)
  std::string shape;   // space-separated key=value tokens, e.g. "T=4096 N=65536 H=64 causal"
  std::string kernel;  // which kernel ran
  double ms = NAN;     // NaN: the op did not run (see note)
  double tflops = NAN; // NaN: not counted in FLOPs (top-k) -> "-"
  double gbps = NAN;   // memory rate, for the bandwidth-bound ops
  double vs_anchor = NAN;  // the anchor's time on the same inputs in the same run over ours (> 1: faster)
  std::string note;    // why a row has no time (e.g. "NotImplemented: ...")
};

class Results {
 public:
  void set_gemm_tflops(double tflops) { gemm_tflops_ = tflops; }
  void add(ResultRow row) { rows_.push_back(std::move(row)); }
  const std::vector<ResultRow>& rows() const { return rows_; }
  ResultRow& row(size_t i) { return rows_[i]; }
  // The rows from index `first` on, with the same yardstick (to report one op as soon as it ends).
  Results since(size_t first) const {
    Results part;
    part.gemm_tflops_ = gemm_tflops_;
    part.rows_.assign(rows_.begin() + static_cast<std::ptrdiff_t>(std::min(first, rows_.size())), rows_.end());
    return part;
  }

  // op, shape, kernel, ms, TFLOPS, ratio_to_fp8_gemm, x_anchor, GB/s; a row that did not run shows
  // its note after the last column.
  void print_table(std::FILE* out) const;

  // Appends every row that ran, except the yardstick itself, to `path`; writes the header first
  // when the file is absent or empty.
  Status append_csv(const std::string& path, const std::string& gpu, const std::string& commit) const;

 private:
  double gemm_tflops_ = NAN;
  std::vector<ResultRow> rows_;
};

// A row for a shape the library refused (NotImplemented / InvalidArgument): adds it with the
// message as its note and returns true, so the benchmark goes on with the next shape. Any other
// error (a CUDA failure) returns false: the caller aborts.
bool record_if_refused(const Status& status, ResultRow row, Results* results);

// "T=4096 N=32768 k=2048" from {{"T", 4096}, {"N", 32768}, {"k", 2048}}, plus an optional bare
// token such as "causal".
std::string shape_string(std::initializer_list<std::pair<const char*, int64_t>> tokens,
                         const char* suffix = nullptr);

// Current UTC time as ISO 8601, e.g. 2025-05-01T12:34:56Z.
std::string iso_utc_now();

}  // namespace fp8dsa::bench
