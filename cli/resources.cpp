#include "resources.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "fp8dsa/cpu_time.h"

namespace fp8dsa::cli {
namespace {

// Sizes as doubles: the product of the largest flags (2^24 tokens x 2^30 keys) overflows int64.
struct Shape {
  double t, n, logits_stride, index_heads, heads, topk, samples;
};

Shape shape_of(const RunOptions& o) {
  Shape s;
  s.t = static_cast<double>(o.tokens);
  s.n = static_cast<double>(o.tokens + o.cached);
  s.logits_stride = static_cast<double>((o.tokens + o.cached + 3) / 4 * 4);
  s.index_heads = o.index_heads;
  s.heads = o.heads;
  s.topk = o.topk;
  s.samples = std::min<double>(o.check_tokens, s.t);
  return s;
}

// The synthetic inputs: indexer q [T, H, 128] e4m3, w [T, H] f32, k [N, 128] e4m3, k_scale [N],
// ks / ke [T]; attention q [T, h, 576] e4m3, kv [N, 576] e4m3.
double input_bytes(const Shape& s) {
  return s.t * (s.index_heads * (kIndexDim + 4) + 8 + s.heads * kDimQk) + s.n * (kIndexDim + 4 + kDimQk);
}

// out [T, h, 512] bf16, lse and max_logits [T, h] f32.
double attention_output_bytes(double tokens, double heads) { return tokens * heads * (kDimV * 2 + 8); }

// The sparse MLA reference's working memory for `tokens` tokens: the key lists (twice, while the
// distinct rows are sorted out) and the selected kv rows in f64.
double mla_reference_bytes(const Shape& s, double tokens) {
  return tokens * (s.topk * 8 + 32) + std::min(s.n, tokens * s.topk) * kDimQk * 8;
}

// The sampled checks: the tokens' logits (f32 as run, f64 reference), their outputs (as run and
// in f64) and the attention reference on them.
double check_bytes(const Shape& s) {
  return s.samples * s.n * 12 + s.samples * s.topk * 4 + s.samples * s.heads * (kDimV * 10 + 16) +
         mla_reference_bytes(s, s.samples);
}

}  // namespace

double host_bytes_needed(const RunOptions& o, bool gpu) {
  const Shape s = shape_of(o);
  double bytes = input_bytes(s) + check_bytes(s) + s.t * s.topk * 4;  // + the indices
  if (gpu) return bytes;
  // The stages one by one: logits [T, logits_stride], indices, outputs; then prefill_cpu: its own indices,
  // a block of logits rows (>= 64 rows, ~2^24 floats) and outputs.
  const double block_rows = std::min(s.t, std::max(64.0, 16777216.0 / s.logits_stride));
  bytes += s.t * s.logits_stride * 4 + attention_output_bytes(s.t, s.heads);
  bytes += s.t * s.topk * 4 + block_rows * s.logits_stride * 4 + attention_output_bytes(s.t, s.heads);
  return bytes + mla_reference_bytes(s, s.t);
}

double device_bytes_needed(const RunOptions& o) {
  const Shape s = shape_of(o);
  // Inputs, logits, indices (the stage's and the prefill workspace's), two sets of outputs, the
  // prefill workspace's logits.
  return input_bytes(s) + 2 * s.t * s.logits_stride * 4 + 2 * s.t * s.topk * 4 +
         2 * attention_output_bytes(s.t, s.heads);
}

double host_bytes_available(std::string* source) {
  double best = -1.0;
  auto consider = [&](double bytes, const char* what) {
    if (bytes >= 0 && (best < 0 || bytes < best)) {
      best = bytes;
      *source = what;
    }
  };
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      unsigned long long kb = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) consider(static_cast<double>(kb) * 1024, "MemAvailable");
    }
    std::fclose(f);
  }
  double used = 0.0;  // the process's address space now (the limits count all of it)
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long pages = 0;
    if (std::fscanf(f, "%llu", &pages) == 1) used = static_cast<double>(pages) * static_cast<double>(sysconf(_SC_PAGESIZE));
    std::fclose(f);
  }
  for (const auto& [resource, what] : {std::pair{RLIMIT_AS, "the address-space limit (ulimit -v)"},
                                       std::pair{RLIMIT_DATA, "the data-size limit (ulimit -d)"}}) {
    rlimit limit{};
    if (getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      consider(std::max(0.0, static_cast<double>(limit.rlim_cur) - used), what);
    }
  }
  return best;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 6) {
    bytes /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), bytes < 10 && u > 0 ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

std::string check_memory(const RunOptions& o, bool gpu) {
  std::string source;
  const double host_need = host_bytes_needed(o, gpu);
  const double host_have = host_bytes_available(&source);
  if (host_have >= 0 && host_need > host_have) {
    return "this run needs about " + format_bytes(host_need) + " of host memory, " + format_bytes(host_have) +
           " is available (" + source + "); use smaller --tokens / --cached" + (gpu ? "" : " (or a GPU)");
  }
  if (gpu) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      const double device_need = device_bytes_needed(o);
      if (device_need > static_cast<double>(free_bytes)) {
        return "this run needs about " + format_bytes(device_need) + " of GPU memory, " +
               format_bytes(static_cast<double>(free_bytes)) + " is free; use smaller --tokens / --cached / --heads";
      }
    } else {
      cudaGetLastError();
    }
  }
  return "";
}

reference::CpuTimeEstimate cpu_time_estimate(const RunOptions& o) {
  const double tokens = static_cast<double>(o.tokens);
  const double keys = static_cast<double>(o.tokens + o.cached);
  // Token t sees cached + t + 1 keys (causal): on average cached + (T + 1) / 2.
  const double pairs = tokens * (static_cast<double>(o.cached) + (tokens + 1.0) / 2.0);
  const double indexer = reference::indexer_cpu_flops(pairs, o.index_heads, kIndexDim);
  const double attention = reference::sparse_mla_cpu_flops(tokens * o.heads, std::min<double>(o.topk, keys), kDimQk, kDimV);
  // Each reference runs twice (stage by stage and inside the whole prefill).
  return reference::cpu_time_estimate(2.0 * indexer, 2.0 * attention);
}

int check_runnable(const RunOptions& o, bool gpu) {
  if (const Status s = validate_options(o); !s.is_ok()) {
    std::fprintf(stderr, "fp8dsa run: %s\n", s.to_string().c_str());
    return 2;
  }
  if (const std::string why = check_memory(o, gpu); !why.empty()) {
    std::fprintf(stderr, "fp8dsa run: %s\n", why.c_str());
    return 2;
  }
  if (!gpu) {
    if (const char* value = std::getenv(kCpuThreadsVariable); value != nullptr && cpu_threads_from(value) == 0) {
      std::fprintf(stderr, "fp8dsa run: %s='%s' is not a positive integer (the CPU references' threads)\n",
                   kCpuThreadsVariable, value);
      return 2;
    }
    const reference::CpuTimeEstimate estimate = cpu_time_estimate(o);
    if (estimate.seconds > reference::kMaxCpuSeconds) {
      std::fprintf(stderr,
                   "fp8dsa run: the CPU references of this shape would take %s (limit %.0f minutes); "
                   "use smaller --tokens / --cached (or a GPU)\n",
                   estimate.to_string().c_str(), reference::kMaxCpuSeconds / 60.0);
      return 2;
    }
    if (estimate.seconds > 30.0) {
      std::fprintf(stderr, "fp8dsa run: the CPU references of this shape take %s\n", estimate.to_string().c_str());
    }
  }
  return 0;
}

}  // namespace fp8dsa::cli
