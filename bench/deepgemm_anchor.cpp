#include "deepgemm_anchor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "anchor_process.h"

namespace fp8dsa::bench {
namespace {

// The first `count` elements of dir/name into v; the file must hold at least that many (exactly
// that many when `exact`).
template <typename T>
Status read_prefix(const std::string& dir, const char* name, size_t count, bool exact, std::vector<T>* v) {
  const std::string path = dir + "/" + name;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return invalid_argument("the DeepGEMM dump has no " + path);
  const auto size = static_cast<size_t>(f.tellg());
  const size_t want = count * sizeof(T);
  if (size < want || (exact && size != want)) {
    return invalid_argument(path + " holds " + std::to_string(size) + " bytes, the case needs " +
                            (exact ? "" : "at least ") + std::to_string(want));
  }
  v->resize(count);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v->data()), static_cast<std::streamsize>(want));
  if (!f) return invalid_argument("cannot read " + path);
  return Status::ok();
}

}  // namespace

Status read_deepgemm_case(const std::string& dir, int64_t num_tokens, int64_t num_keys, int num_heads,
                          DeepgemmCase* out) {
  if (num_tokens <= 0 || num_keys <= 0 || num_heads <= 0) return invalid_argument("empty DeepGEMM case");
  DeepgemmCase c;
  c.num_tokens = num_tokens;
  c.num_keys = num_keys;
  c.num_heads = num_heads;
  const auto T = static_cast<size_t>(num_tokens), N = static_cast<size_t>(num_keys);
  const auto H = static_cast<size_t>(num_heads), D = static_cast<size_t>(kDeepgemmHeadDim);
  {
    // The row stride: stride.txt holds it alone or as a line "stride S"; meta.txt has the line too.
    std::string seen;
    for (const char* name : {"/stride.txt", "/meta.txt"}) {
      std::ifstream f(dir + name);
      std::string line;
      while (c.stride == 0 && std::getline(f, line)) {
        long long s = 0;
        char rest = 0;
        if (std::sscanf(line.c_str(), "stride %lld", &s) == 1 || std::sscanf(line.c_str(), " %lld %c", &s, &rest) == 1)
          c.stride = s;
        if (seen.size() < 160) seen += line.substr(0, 80) + " | ";
      }
      if (c.stride != 0) break;
    }
    if (c.stride < num_keys) {
      return invalid_argument(dir + "/stride.txt (or meta.txt) names no row stride >= N = " + std::to_string(num_keys) +
                              " (read: " + (seen.empty() ? std::string("nothing") : seen) + ")");
    }
  }
  FP8DSA_RETURN_IF_ERROR(read_prefix(dir, "q.e4m3", T * H * D, true, &c.q));
  FP8DSA_RETURN_IF_ERROR(read_prefix(dir, "k.e4m3", N * D, true, &c.k));
  FP8DSA_RETURN_IF_ERROR(read_prefix(dir, "k_scale.f32", N, false, &c.k_scale));
  FP8DSA_RETURN_IF_ERROR(read_prefix(dir, "w.f32", T * H, true, &c.w));
  FP8DSA_RETURN_IF_ERROR(read_prefix(dir, "ks.i32", T, true, &c.ks));
  FP8DSA_RETURN_IF_ERROR(read_prefix(dir, "ke.i32", T, true, &c.ke));
  FP8DSA_RETURN_IF_ERROR(read_prefix(dir, "logits.f32", T * static_cast<size_t>(c.stride), true, &c.logits));
  *out = std::move(c);
  return Status::ok();
}

Status dump_deepgemm_case(const std::string& exe, const std::string& dir, int64_t num_tokens, int64_t num_keys,
                          int num_heads, DeepgemmCase* out) {
  FP8DSA_RETURN_IF_ERROR(make_directory(dir));
  const std::string cmd = "'" + exe + "' --dump '" + dir + "' --T " + std::to_string(num_tokens) + " --N " +
                          std::to_string(num_keys) + " --H " + std::to_string(num_heads) + " 2>&1";
  int rc = 0;
  const std::string output = run_command(cmd, &rc);
  if (rc != 0) return invalid_argument("the DeepGEMM anchor failed (" + cmd + "): " + output_tail(output, 400));
  return read_deepgemm_case(dir, num_tokens, num_keys, num_heads, out);
}

bool parse_deepgemm_mqa_ms(const std::string& output, int num_heads, int64_t num_keys, int64_t num_tokens,
                           double* ms) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t bar = line.find('|');
    if (bar == std::string::npos) continue;
    // The integer columns before the bar: the case's H, N and T among the first three.
    std::istringstream left(line.substr(0, bar));
    std::vector<long long> ints;
    std::string token;
    bool all_integers = true;
    while (left >> token) {
      char* end = nullptr;
      const long long v = std::strtoll(token.c_str(), &end, 10);
      if (end == token.c_str() || *end != '\0') {
        all_integers = false;
        break;
      }
      ints.push_back(v);
    }
    if (!all_integers || ints.size() < 3) continue;
    const auto first3_has = [&](long long v) { return std::find(ints.begin(), ints.begin() + 3, v) != ints.begin() + 3; };
    if (!first3_has(num_heads) || !first3_has(num_keys) || !first3_has(num_tokens)) continue;
    std::istringstream right(line.substr(bar + 1));
    double v = NAN;
    if (right >> v && std::isfinite(v) && v > 0.0) {
      *ms = v;
      return true;
    }
  }
  return false;
}

bool parse_deepgemm_dump_time(const std::string& output, int num_heads, int64_t num_keys, int64_t num_tokens,
                              double* ms) {
  const std::string want = "H=" + std::to_string(num_heads) + " N=" + std::to_string(num_keys) +
                           " T=" + std::to_string(num_tokens) + " ";
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("dump_case_time ", 0) != 0 || line.find(want) == std::string::npos) continue;
    const size_t at = line.find("mqa_ms_median ");
    if (at == std::string::npos) continue;
    std::istringstream value(line.substr(at + std::string("mqa_ms_median ").size()));
    double v = NAN;
    if (value >> v && std::isfinite(v) && v > 0.0) {
      *ms = v;
      return true;
    }
  }
  return false;
}

Status time_deepgemm_dump(const std::string& exe, const std::string& dir, int64_t num_tokens, int64_t num_keys,
                          int num_heads, int iters, double* ms) {
  FP8DSA_RETURN_IF_ERROR(make_directory(dir));
  const std::string cmd = "'" + exe + "' --dump '" + dir + "' --T " + std::to_string(num_tokens) + " --N " +
                          std::to_string(num_keys) + " --H " + std::to_string(num_heads) + " --time --iters " +
                          std::to_string(iters) + " 2>&1";
  int rc = 0;
  const std::string output = run_command(cmd, &rc);
  if (rc != 0) return invalid_argument("the DeepGEMM anchor failed (" + cmd + "): " + output_tail(output, 400));
  if (!parse_deepgemm_dump_time(output, num_heads, num_keys, num_tokens, ms)) {
    return invalid_argument("no dump_case_time for H=" + std::to_string(num_heads) + " N=" + std::to_string(num_keys) +
                            " T=" + std::to_string(num_tokens) + " in the DeepGEMM anchor's output: " +
                            output_tail(output, 600));
  }
  return Status::ok();
}

Status time_deepgemm_case(const std::string& exe, int64_t num_tokens, int64_t num_keys, int num_heads, int iters,
                          double* ms) {
  const std::string cmd = "'" + exe + "' --case " + std::to_string(num_heads) + ":" + std::to_string(num_keys) + ":" +
                          std::to_string(num_tokens) + " --no-check --iters " + std::to_string(iters) + " 2>&1";
  int rc = 0;
  const std::string output = run_command(cmd, &rc);
  if (rc != 0) return invalid_argument("the DeepGEMM anchor failed (" + cmd + "): " + output_tail(output, 400));
  if (!parse_deepgemm_mqa_ms(output, num_heads, num_keys, num_tokens, ms)) {
    return invalid_argument("no mqa_ms for H=" + std::to_string(num_heads) + " N=" + std::to_string(num_keys) +
                            " T=" + std::to_string(num_tokens) + " in the DeepGEMM anchor's output: " +
                            output_tail(output, 600));
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
