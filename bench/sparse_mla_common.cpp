#include "sparse_mla_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "anchor_process.h"


namespace fp8dsa::bench {

tools::MlaWorkload make_bench_workload(const BenchContext& ctx, int64_t num_keys, double score_std,
                                       tools::MlaValues values, bool unrounded, tools::MlaSelection selection) {
  tools::MlaWorkloadSpec spec;  // sm_scale: 1 / sqrt(192), DeepSeek-V3.2 without the YaRN factor
  spec.num_tokens = kMlaTokens;
  spec.num_kv = num_keys;
  spec.num_heads = kMlaMaxHeads;
  spec.topk = kMlaTopk;
  spec.score_std = score_std;
  spec.seed = ctx.seed + static_cast<uint64_t>(num_keys);
  spec.values = values;
  spec.selection = selection;
  spec.unrounded_every = unrounded ? kMlaCheckEvery : 0;
  return tools::make_mla_workload(spec);
}

bool parse_mla_selection(const std::string& name, tools::MlaSelection* selection) {
  for (tools::MlaSelection s : {tools::MlaSelection::kRealistic, tools::MlaSelection::kUniform}) {
    if (name == tools::mla_selection_name(s)) {
      *selection = s;
      return true;
    }
  }
  return false;
}

bool mla_data_wanted(const BenchContext& ctx, const MlaDataSet& set) {
  if (ctx.mla_data.empty()) return true;
  for (const std::string& name : ctx.mla_data) {
    if (name == set.label) return true;
  }
  return false;
}

std::string mla_data_set_names() {
  std::string names;
  for (const MlaDataSet& set : kMlaDataSets) names += (names.empty() ? "" : ", ") + std::string(set.label);
  return names;
}

bool is_mla_data_set(const std::string& name) {
  for (const MlaDataSet& set : kMlaDataSets) {
    if (name == set.label) return true;
  }
  return false;
}

std::vector<uint16_t> bf16_of_e4m3(const std::vector<uint8_t>& e4m3) {
  std::vector<uint16_t> out(e4m3.size());
  for (size_t i = 0; i < e4m3.size(); ++i) out[i] = bf16_of_e4m3(e4m3[i]);
  return out;
}

void print_mla_accuracy(const char* who, const std::string& shape, const tools::SparseMlaCheck& c,
                        bool rounded_inputs) {
  // On inputs rounded from continuous values SPEC 6 judges lse and max_logits against the rounding
  // (print_rounding_accuracy's line); this line's per-row bound is the one for e4m3-exact inputs.
  const char* verdict = c.passed ? "" : rounded_inputs ? "  (past the e4m3-exact bound; see the rounding line)"
                                                       : "  (outside SPEC 6)";
  std::printf("  accuracy %-14s %s: rel L2 %.2e  cos %.6f  lse err %.2e  max_logits err %.2e  worst err/limit %.2f%s\n",
              who, shape.c_str(), c.rel_l2, c.cosine, c.max_lse_error, c.max_max_logits_error, c.worst_bound_ratio,
              verdict);
}

namespace {

struct AnchorFile {
  std::string name;
  const void* data;
  size_t bytes;
};

// Runs `exe io` on the input files in ctx.anchor_dir/<prefix>_io, reads kernel_ms_median from its
// output and its results from <prefix>_out.bf16, <prefix>_lse.f32 and <prefix>_maxlogits.f32.
Status run_anchor_io(const BenchContext& ctx, const std::string& exe, const std::string& prefix,
                     const std::vector<AnchorFile>& inputs, int64_t num_tokens, int64_t num_kv, int num_heads, int topk,
                     float sm_scale, double* ms, std::vector<uint16_t>* out, std::vector<float>* lse,
                     std::vector<float>* max_logits) {
  const std::string dir = ctx.anchor_dir + "/" + prefix + "_io";
  FP8DSA_RETURN_IF_ERROR(make_directory(dir));
  for (const AnchorFile& f : inputs) {
    std::ofstream file(dir + "/" + f.name, std::ios::binary);
    file.write(static_cast<const char*>(f.data), static_cast<std::streamsize>(f.bytes));
    if (!file) return invalid_argument("cannot write the anchor's input " + dir + "/" + f.name);
  }
  std::remove((dir + "/topk_length.i32").c_str());
  std::remove((dir + "/attn_sink.f32").c_str());
  char cmd[1024];
  std::snprintf(cmd, sizeof(cmd),
                "'%s' io --dir '%s' --T %lld --N %lld --h %d --topk %d --sm_scale %.9g --iters %d --no-check",
                exe.c_str(), dir.c_str(), static_cast<long long>(num_tokens), static_cast<long long>(num_kv),
                num_heads, topk, static_cast<double>(sm_scale), std::max(ctx.timing.reps, 5));
  int rc = 0;
  const std::string output = run_command(cmd, &rc);
  if (rc == -1) return invalid_argument(std::string("cannot run ") + cmd);
  *ms = NAN;
  for (const KernelTime& t : kernel_times(output)) {
    if (t.name.empty()) *ms = t.ms;
  }
  if (rc != 0 || std::isnan(*ms)) return invalid_argument(std::string("the anchor failed: ") + cmd);
  const size_t rows = static_cast<size_t>(num_tokens) * num_heads;
  out->resize(rows * 512);
  lse->resize(rows);
  max_logits->resize(rows);
  if (!read_file(dir + "/" + prefix + "_out.bf16", out) || !read_file(dir + "/" + prefix + "_lse.f32", lse) ||
      !read_file(dir + "/" + prefix + "_maxlogits.f32", max_logits)) {
    return invalid_argument("cannot read the anchor's outputs from " + dir);
  }
  return Status::ok();
}

template <typename T>
AnchorFile anchor_file(const char* name, const std::vector<T>& v) {
  return AnchorFile{name, v.data(), v.size() * sizeof(T)};
}

}  // namespace

Status run_flashmla_io(const BenchContext& ctx, const FlashMlaInputs& in, double* ms, std::vector<uint16_t>* out,
                       std::vector<float>* lse, std::vector<float>* max_logits) {
  return run_anchor_io(ctx, ctx.flashmla, "flashmla",
                       {anchor_file("q.bf16", *in.q), anchor_file("kv.bf16", *in.kv),
                        anchor_file("indices.i32", *in.indices)},
                       in.num_tokens, in.num_kv, in.num_heads, in.topk, in.sm_scale, ms, out, lse, max_logits);
}

Status run_q8kv8_io(const BenchContext& ctx, const Q8kv8Inputs& in, double* ms, std::vector<uint16_t>* out,
                    std::vector<float>* lse, std::vector<float>* max_logits) {
  return run_anchor_io(ctx, ctx.q8kv8, "q8kv8",
                       {anchor_file("q.e4m3", *in.q), anchor_file("kv.e4m3", *in.kv),
                        anchor_file("indices.i32", *in.indices)},
                       in.num_tokens, in.num_kv, in.num_heads, in.topk, in.sm_scale, ms, out, lse, max_logits);
}

Status run_flashmla_kv_io(const BenchContext& ctx, const FlashMlaKvInputs& in, double* ms,
                          std::vector<uint16_t>* out, std::vector<float>* lse, std::vector<float>* max_logits) {
  return run_anchor_io(ctx, ctx.flashmla_kv, "flashmla_kv",
                       {anchor_file("q.bf16", *in.q), anchor_file("kv.v32", *in.kv),
                        anchor_file("indices.i32", *in.indices)},
                       in.num_tokens, in.num_kv, in.num_heads, in.topk, in.sm_scale, ms, out, lse, max_logits);
}

void print_rounding_accuracy(const char* who, const std::string& shape, const tools::RoundingCheck& c) {
  std::printf("  rounding %-14s %s: out err %.2fx the rounding's (rel L2 %.2e vs %.2e)  cos %.6f  lse err %.2e "
              "(limit %.2e, rounding %.2e)  max_logits err %.2e (limit %.2e)%s\n",
              who, shape.c_str(), c.out_error_ratio, c.kernel.rel_l2, c.rounding_rel_l2, c.kernel.cosine,
              c.kernel.max_lse_error, c.lse_limit, c.rounding_max_lse_error, c.kernel.max_max_logits_error,
              c.max_logits_limit, c.passed ? "" : "  (outside SPEC 6)");
}

}  // namespace fp8dsa::bench
