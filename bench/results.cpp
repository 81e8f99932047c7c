#include "results.h"

#include "op_benches.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <fstream>

namespace fp8dsa::bench {
namespace {

constexpr const char* kCsvHeader = "date,gpu,op,shape,ms,tflops,ratio_to_fp8_gemm,commit";

std::string format(const char* fmt, double value) {
  if (std::isnan(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

// RFC 4180 quoting for the rare field with a comma or quote (GPU names have neither today).
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

bool record_if_refused(const Status& status, ResultRow row, Results* results) {
  if (status.code() != StatusCode::kNotImplemented && status.code() != StatusCode::kInvalidArgument) {
    return false;
  }
  row.ms = NAN;
  row.tflops = NAN;
  row.gbps = NAN;
  row.note = status.to_string();
  results->add(std::move(row));
  return true;
}

Status time_and_record(const BenchContext& ctx, int sets, const std::function<Status(int set)>& launch,
                       ResultRow row, const std::function<void(double seconds, ResultRow& row)>& derive) {
  tools::Timing timing;
  const Status status = tools::time_launches(ctx.stream, sets, ctx.timing, launch, &timing);
  if (!status.is_ok()) return record_if_refused(status, row, ctx.results) ? Status::ok() : status;
  row.ms = timing.median_ms;
  derive(timing.median_ms * 1e-3, row);
  ctx.results->add(std::move(row));
  return Status::ok();
}

std::string shape_string(std::initializer_list<std::pair<const char*, int64_t>> tokens,
                         const char* suffix) {
  std::string s;
  for (const auto& [key, value] : tokens) {
    if (!s.empty()) s += ' ';
    s += std::string(key) + "=" + std::to_string(value);
  }
  if (suffix != nullptr) s += std::string(" ") + suffix;
  return s;
}

std::string iso_utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

void Results::print_table(std::FILE* out) const {
  constexpr int kColumns = 8;
  std::vector<std::array<std::string, kColumns>> cells;
  cells.push_back({"op", "shape", "kernel", "ms", "TFLOPS", "ratio_to_fp8_gemm", "x_anchor", "GB/s"});
  for (const ResultRow& r : rows_) {
    const double ratio = std::isnan(gemm_tflops_) || gemm_tflops_ <= 0 ? NAN : r.tflops / gemm_tflops_;
    std::array<std::string, kColumns> c{r.op, r.shape, r.kernel, format("%.3f", r.ms), format("%.1f", r.tflops),
                                        format("%.3f", ratio), format("%.3f", r.vs_anchor), format("%.0f", r.gbps)};
    if (std::isnan(r.ms)) c[kColumns - 1] += "  (not run: " + r.note + ")";
    cells.push_back(std::move(c));
  }
  size_t w[kColumns] = {};
  for (const auto& c : cells) {
    for (int i = 0; i + 1 < kColumns; ++i) w[i] = std::max(w[i], c[i].size());
    w[kColumns - 1] = std::max(w[kColumns - 1], std::min<size_t>(c[kColumns - 1].size(), 5));  // a note may overflow
  }
  for (size_t row = 0; row < cells.size(); ++row) {
    const auto& c = cells[row];
    std::fprintf(out, "%-*s  %-*s  %-*s  %*s  %*s  %*s  %*s  %*s\n", int(w[0]), c[0].c_str(), int(w[1]), c[1].c_str(),
                 int(w[2]), c[2].c_str(), int(w[3]), c[3].c_str(), int(w[4]), c[4].c_str(), int(w[5]), c[5].c_str(),
                 int(w[6]), c[6].c_str(), int(w[7]), c[7].c_str());
    if (row == 0) {
      size_t total = 2 * (kColumns - 1);
      for (size_t x : w) total += x;
      std::fprintf(out, "%s\n", std::string(total, '-').c_str());
    }
  }
}

Status Results::append_csv(const std::string& path, const std::string& gpu, const std::string& commit) const {
  bool need_header = true;
  {
    std::ifstream existing(path);
    if (existing) {
      existing.seekg(0, std::ios::end);
      need_header = existing.tellg() <= 0;
    }
  }
  std::ofstream csv(path, std::ios::app);
  if (!csv) return invalid_argument("cannot open " + path + " for appending");
  if (need_header) csv << kCsvHeader << "\n";
  const std::string date = iso_utc_now();
  int written = 0;
  for (const ResultRow& r : rows_) {
    if (std::isnan(r.ms) || r.op == "fp8_gemm") continue;
    const double ratio = std::isnan(gemm_tflops_) || gemm_tflops_ <= 0 ? NAN : r.tflops / gemm_tflops_;
    csv << date << ',' << csv_field(gpu) << ',' << r.op << ',' << csv_field(r.shape) << ','
        << format("%.4f", r.ms) << ',' << format("%.1f", r.tflops) << ',' << format("%.4f", ratio) << ','
        << csv_field(commit) << "\n";
    ++written;
  }
  if (!csv) return invalid_argument("writing " + path + " failed");
  std::printf("appended %d row(s) to %s\n", written, path.c_str());
  return Status::ok();
}

}  // namespace fp8dsa::bench
