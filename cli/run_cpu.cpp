// The CPU path of `fp8dsa run`: the references that define the library's semantics, on a shape small
// enough for a laptop, with progress lines (the indexer reference alone is T * N * H * D f64 MACs).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fp8dsa/pipeline.h"
#include "resources.h"
#include "run.h"
#include "stage_table.h"

namespace fp8dsa::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void progress(const char* what) {
  std::printf("  %s ...", what);
  std::fflush(stdout);
}

void done(double ms) { std::printf(" %.0f ms\n", ms); }

// Ends any open progress line on stdout, reports on stderr; `code`: 1 for a failed call, 2 for a
// run that cannot go ahead.
int fail(const char* what, const Status& status, int code = 1) {
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "fp8dsa run: %s: %s\n", what, status.to_string().c_str());
  return code;
}

// Copies rows of a [T, row] array for the sampled tokens.
template <typename T>
void take_rows(const std::vector<T>& all, const std::vector<int64_t>& tokens, size_t row, std::vector<T>* out) {
  out->clear();
  for (int64_t t : tokens) {
    out->insert(out->end(), all.begin() + static_cast<std::ptrdiff_t>(t * row),
                all.begin() + static_cast<std::ptrdiff_t>((t + 1) * row));
  }
}

}  // namespace

int run_on_cpu(const RunOptions& requested) {
  const RunOptions o = with_defaults(requested, /*gpu=*/false);
  if (const int rc = check_runnable(o, /*gpu=*/false); rc != 0) return rc;
  HostProblem problem;
  progress("generating random inputs");
  const Clock::time_point gen_start = Clock::now();
  if (const Status s = make_problem(o, &problem); !s.is_ok()) return fail("inputs", s, 2);
  done(ms_since(gen_start));
  print_problem(problem, "CPU references");

  const int64_t T = problem.num_tokens, N = problem.num_keys;
  const int h = o.heads, k = o.topk;
  std::vector<StageRow> rows;

  // Stage 1: indexer logits [T, logits_stride] f32, rows padded to 16 bytes as the indexer requires.
  const int64_t logits_stride = (N + 3) / 4 * 4;
  std::vector<float> logits(static_cast<size_t>(T * logits_stride));
  IndexerParams indexer = problem.indexer_params();
  indexer.logits = logits.data();
  indexer.logits_stride = logits_stride;
  progress("[1/4] indexer (reference::indexer_logits_cpu)");
  Clock::time_point start = Clock::now();
  if (const Status s = reference::indexer_logits_cpu(indexer); !s.is_ok()) return fail("indexer", s);
  rows.push_back({"indexer", "CPU reference (f64)", ms_since(start),
                  2.0 * o.index_heads * kIndexDim * static_cast<double>(problem.valid_pairs), {}, ""});
  done(rows.back().ms);

  // Stage 2: top-k [T, k].
  std::vector<int32_t> indices(static_cast<size_t>(T * k));
  TopkParams topk;
  topk.num_rows = T;
  topk.num_keys = N;
  topk.logits = logits.data();
  topk.logits_stride = logits_stride;
  topk.ks = problem.ks.data();
  topk.ke = problem.ke.data();
  topk.k = k;
  topk.indices = indices.data();
  progress("[2/4] top-k (reference::topk_cpu)");
  start = Clock::now();
  if (const Status s = reference::topk_cpu(topk); !s.is_ok()) return fail("top-k", s);
  rows.push_back({"topk", "CPU reference", ms_since(start), NAN, {}, ""});
  done(rows.back().ms);

  // Stage 3: sparse MLA on the selected rows.
  int64_t valid_selected = 0;
  for (int32_t i : indices) valid_selected += (i >= 0 && i < N) ? 1 : 0;
  std::vector<uint16_t> out(static_cast<size_t>(T) * h * kDimV);
  std::vector<float> lse(static_cast<size_t>(T) * h), max_logits(lse.size());
  SparseMlaParams attention = problem.attention_params();
  attention.indices = indices.data();
  attention.out = out.data();
  attention.lse = lse.data();
  attention.max_logits = max_logits.data();
  progress("[3/4] sparse MLA (reference::sparse_mla_cpu)");
  start = Clock::now();
  if (const Status s = reference::sparse_mla_cpu(attention); !s.is_ok()) return fail("sparse MLA", s);
  const double mla_flops = 2.0 * h * (kDimQk + kDimV) * static_cast<double>(valid_selected);
  rows.push_back({"sparse_mla", "CPU reference (f64)", ms_since(start), mla_flops, {}, ""});
  done(rows.back().ms);

  // The whole chain in one call.
  std::vector<uint16_t> chain_out(out.size());
  std::vector<float> chain_lse(lse.size()), chain_max(lse.size());
  PrefillParams prefill;
  prefill.indexer = problem.indexer_params();
  prefill.attention = problem.attention_params();
  prefill.attention.out = chain_out.data();
  prefill.attention.lse = chain_lse.data();
  prefill.attention.max_logits = chain_max.data();
  prefill.topk = k;
  progress("[4/4] whole prefill (reference::prefill_cpu)");
  start = Clock::now();
  if (const Status s = reference::prefill_cpu(prefill); !s.is_ok()) return fail("prefill", s);
  StageRow chain{"prefill (chain)", "reference::prefill_cpu", ms_since(start), rows[0].flops + mla_flops, {}, ""};
  done(chain.ms);
  const bool same = std::memcmp(chain_out.data(), out.data(), out.size() * sizeof(uint16_t)) == 0 &&
                    std::memcmp(chain_lse.data(), lse.data(), lse.size() * sizeof(float)) == 0;
  chain.check.ran = true;
  chain.check.passed = same;
  chain.check.summary = same ? "pass (bitwise equal to the stages)" : "FAIL (differs from the stages)";
  chain.check.detail = "reference::prefill_cpu and the three references run one by one disagree";

  // Sampled checks against the f64 references.
  SampledOutputs got;
  got.tokens = sample_tokens(T, o.check_tokens, o.seed + 7);
  if (!got.tokens.empty()) {
    progress("checking sampled tokens against the f64 references");
    start = Clock::now();
    for (int64_t t : got.tokens) {
      got.logits.insert(got.logits.end(), logits.begin() + t * logits_stride, logits.begin() + t * logits_stride + N);
    }
    take_rows(indices, got.tokens, static_cast<size_t>(k), &got.indices);
    take_rows(out, got.tokens, static_cast<size_t>(h) * kDimV, &got.out);
    take_rows(lse, got.tokens, static_cast<size_t>(h), &got.lse);
    take_rows(max_logits, got.tokens, static_cast<size_t>(h), &got.max_logits);
    std::vector<double> ref_logits;
    if (const Status s = reference_logits(problem, got.tokens, &ref_logits); !s.is_ok()) {
      return fail("reference logits", s);
    }
    rows[0].check = check_indexer(problem, got, ref_logits);
    rows[1].check = check_topk(problem, got);
    rows[2].check = check_attention(problem, got);
    done(ms_since(start));
  }
  rows.push_back(chain);

  return print_stage_report(rows);
}

}  // namespace fp8dsa::cli
