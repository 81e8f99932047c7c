// The GPU path of `fp8dsa run`: the three fast entry points one by one (each timed on its own),
// then fp8dsa::prefill as one call, with sampled checks against the f64 CPU references.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#include "fp8dsa/pipeline.h"
#include "resources.h"
#include "run.h"
#include "stage_table.h"
#include "tools/device_buffer.h"
#include "tools/mla_device_outputs.h"
#include "tools/timing.h"

namespace fp8dsa::cli {
namespace {

constexpr int kTimedRuns = 3;

using tools::DeviceBytes;

// Owns the stream the run uses.
struct OwnedStream {
  cudaStream_t stream = nullptr;
  ~OwnedStream() {
    if (stream) cudaStreamDestroy(stream);
  }
  Status create() { return cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
};

// Runs `fast` once (its output is what the checks see); if the fast kernel is not implemented yet,
// switches to `fallback` and relabels the row. Then times kTimedRuns more runs (median).
Status run_stage(const std::function<Status()>& fast, const std::function<Status()>& fallback,
                 const OwnedStream& s, StageRow* row) {
  const std::function<Status()>* launch = &fast;
  Status first = fast();
  if (first.code() == StatusCode::kNotImplemented && fallback) {
    std::printf(" (%s; using the GPU reference kernel)", first.message().c_str());
    row->kernel = kGpuReferenceLabel;
    launch = &fallback;
    first = fallback();
  }
  FP8DSA_RETURN_IF_ERROR(first);
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream));
  tools::TimingConfig config;
  config.warmup = 0;  // the first run above warmed up
  config.reps = kTimedRuns;
  tools::Timing timing;
  FP8DSA_RETURN_IF_ERROR(tools::time_launches(s.stream, 1, config, [&](int) { return (*launch)(); }, &timing));
  row->ms = timing.median_ms;
  return Status::ok();
}

struct DeviceProblem {
  DeviceBytes index_q, index_w, index_k, index_k_scale, ks, ke, q, kv;

  Status upload(const HostProblem& p) {
    FP8DSA_RETURN_IF_ERROR(tools::upload(p.index_q, &index_q));
    FP8DSA_RETURN_IF_ERROR(tools::upload(p.index_w, &index_w));
    FP8DSA_RETURN_IF_ERROR(tools::upload(p.index_k, &index_k));
    FP8DSA_RETURN_IF_ERROR(tools::upload(p.index_k_scale, &index_k_scale));
    FP8DSA_RETURN_IF_ERROR(tools::upload(p.ks, &ks));
    FP8DSA_RETURN_IF_ERROR(tools::upload(p.ke, &ke));
    FP8DSA_RETURN_IF_ERROR(tools::upload(p.q, &q));
    return tools::upload(p.kv, &kv);
  }
  // The host problem's parameters re-pointed at the device copies.
  IndexerParams indexer_params(const HostProblem& p) const {
    IndexerParams r = p.indexer_params();
    r.q = index_q.get();
    r.w = index_w.as<float>();
    r.k = index_k.get();
    r.k_scale = index_k_scale.as<float>();
    r.ks = ks.as<int32_t>();
    r.ke = ke.as<int32_t>();
    return r;
  }
  SparseMlaParams attention_params(const HostProblem& p) const {
    SparseMlaParams r = p.attention_params();
    r.q = q.get();
    r.kv = kv.get();
    return r;
  }
};

// Ends any open progress line on stdout, reports on stderr; `code`: 1 for a failed call, 2 for a
// run that cannot go ahead.
int fail(const char* what, const Status& status, int code = 1) {
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "fp8dsa run: %s: %s\n", what, status.to_string().c_str());
  return code;
}

}  // namespace

int run_on_gpu(const RunOptions& requested) {
  const RunOptions o = with_defaults(requested, /*gpu=*/true);
  if (const int rc = check_runnable(o, /*gpu=*/true); rc != 0) return rc;
  int dev = 0;
  cudaDeviceProp prop{};
  if (const Status s = cuda_status(cudaGetDevice(&dev), "cudaGetDevice"); !s.is_ok()) return fail("device", s);
  if (const Status s = cuda_status(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"); !s.is_ok()) {
    return fail("device", s);
  }

  std::printf("  generating random inputs ...");
  std::fflush(stdout);
  HostProblem problem;
  if (const Status s = make_problem(o, &problem); !s.is_ok()) return fail("inputs", s, 2);
  std::printf(" done\n");
  print_problem(problem, prop.name);

  const int64_t T = problem.num_tokens, N = problem.num_keys;
  const int h = o.heads, k = o.topk;
  OwnedStream se;
  DeviceProblem dp;
  if (const Status s = se.create(); !s.is_ok()) return fail("stream", s);
  if (const Status s = dp.upload(problem); !s.is_ok()) return fail("upload", s);

  std::vector<StageRow> rows;
  // Stage 1: indexer logits, rows padded to 16 bytes like the pipeline's workspace.
  const int64_t logits_stride = (N + 3) / 4 * 4;
  DeviceBytes logits;
  if (const Status s = logits.allocate(static_cast<size_t>(T) * logits_stride * sizeof(float)); !s.is_ok()) {
    return fail("logits", s);
  }
  IndexerParams ip = dp.indexer_params(problem);
  ip.logits = logits.as<float>();
  ip.logits_stride = logits_stride;
  ip.stream = se.stream;
  StageRow indexer_row{"indexer", indexer_kernel_name(indexer_route(ip)), NAN,
                       2.0 * o.index_heads * kIndexDim * static_cast<double>(problem.valid_pairs), {}, ""};
  std::printf("  [1/4] indexer ...");
  std::fflush(stdout);
  if (const Status s = run_stage([&] { return indexer_logits(ip); },
                                 [&] { return reference::indexer_logits_gpu(ip); }, se, &indexer_row);
      !s.is_ok()) {
    return fail("indexer", s);
  }
  std::printf(" %.3f ms\n", indexer_row.ms);
  rows.push_back(indexer_row);

  // Stage 2: top-k.
  DeviceBytes indices, topk_workspace;
  TopkParams tp;
  tp.num_rows = T;
  tp.num_keys = N;
  tp.logits = logits.as<float>();
  tp.logits_stride = logits_stride;
  tp.ks = dp.ks.as<int32_t>();
  tp.ke = dp.ke.as<int32_t>();
  tp.k = k;
  tp.stream = se.stream;
  if (const Status s = indices.allocate(static_cast<size_t>(T) * k * sizeof(int32_t)); !s.is_ok()) {
    return fail("indices", s);
  }
  tp.indices = indices.as<int32_t>();
  if (const Status s = topk_workspace.allocate(topk_workspace_bytes(tp)); !s.is_ok()) return fail("top-k workspace", s);
  tp.workspace = topk_workspace.get();
  tp.workspace_bytes = topk_workspace.bytes();
  StageRow topk_row{"topk", "fp8dsa::topk", NAN, NAN, {}, ""};
  std::printf("  [2/4] top-k ...");
  std::fflush(stdout);
  if (const Status s = run_stage([&] { return topk(tp); }, [&] { return reference::topk_gpu(tp); }, se, &topk_row);
      !s.is_ok()) {
    return fail("top-k", s);
  }
  std::printf(" %.3f ms\n", topk_row.ms);
  rows.push_back(topk_row);

  // Stage 3: sparse MLA on the selected rows. FLOPs count the valid selections.
  std::vector<int32_t> all_indices(static_cast<size_t>(T) * k);
  if (const Status s = cuda_status(cudaMemcpy(all_indices.data(), indices.get(), indices.bytes(),
                                              cudaMemcpyDeviceToHost), "cudaMemcpy indices");
      !s.is_ok()) {
    return fail("indices", s);
  }
  int64_t valid_selected = 0;
  for (int32_t i : all_indices) valid_selected += (i >= 0 && i < N) ? 1 : 0;
  tools::MlaDeviceOutputs stage_out;
  if (const Status s = stage_out.allocate(T, h); !s.is_ok()) return fail("attention outputs", s);
  SparseMlaParams ap = dp.attention_params(problem);
  ap.indices = indices.as<int32_t>();
  ap.stream = se.stream;
  stage_out.attach(&ap);
  const double mla_flops = 2.0 * h * (kDimQk + kDimV) * static_cast<double>(valid_selected);
  StageRow mla_row{"sparse_mla", sparse_mla_kernel_name(sparse_mla_route(ap)), NAN, mla_flops, {}, ""};
  std::printf("  [3/4] sparse MLA ...");
  std::fflush(stdout);
  if (const Status s = run_stage([&] { return sparse_mla_prefill(ap); },
                                 [&] { return reference::sparse_mla_gpu(ap); }, se, &mla_row);
      !s.is_ok()) {
    return fail("sparse MLA", s);
  }
  std::printf(" %.3f ms\n", mla_row.ms);
  rows.push_back(mla_row);

  // The whole chain in one call.
  tools::MlaDeviceOutputs chain_out;
  if (const Status s = chain_out.allocate(T, h); !s.is_ok()) return fail("attention outputs", s);
  PrefillParams pp;
  pp.indexer = dp.indexer_params(problem);
  pp.attention = dp.attention_params(problem);
  chain_out.attach(&pp.attention);
  pp.topk = k;
  pp.stream = se.stream;
  DeviceBytes workspace;
  if (const Status s = workspace.allocate(prefill_workspace_bytes(pp)); !s.is_ok()) return fail("workspace", s);
  pp.workspace = workspace.get();
  pp.workspace_bytes = workspace.bytes();
  StageRow chain_row{"prefill (chain)", "fp8dsa::prefill", NAN, indexer_row.flops + mla_flops, {}, ""};
  std::printf("  [4/4] whole prefill ...");
  std::fflush(stdout);
  const Status chain_status = run_stage([&] { return prefill(pp); }, nullptr, se, &chain_row);
  if (chain_status.code() == StatusCode::kNotImplemented) {
    chain_row.note = "not run: " + chain_status.to_string();
    std::printf(" not run (%s)\n", chain_status.message().c_str());
  } else if (!chain_status.is_ok()) {
    return fail("prefill", chain_status);
  } else {
    std::printf(" %.3f ms\n", chain_row.ms);
  }

  // Sampled checks against the f64 CPU references.
  SampledOutputs got;
  got.tokens = sample_tokens(T, o.check_tokens, o.seed + 7);
  if (!got.tokens.empty()) {
    std::printf("  checking %zu sampled tokens against the f64 CPU references ...", got.tokens.size());
    std::fflush(stdout);
    for (const Status& s : {tools::download_rows(logits.as<float>(), logits_stride, static_cast<size_t>(N), T,
                                                 got.tokens, &got.logits),
                            tools::download_rows(indices.as<int32_t>(), k, static_cast<size_t>(k), T, got.tokens,
                                                 &got.indices),
                            stage_out.download_tokens(got.tokens, &got.out, &got.lse, &got.max_logits)}) {
      if (!s.is_ok()) return fail("download", s);
    }
    std::vector<double> ref_logits;
    if (const Status s = reference_logits(problem, got.tokens, &ref_logits); !s.is_ok()) {
      return fail("reference logits", s);
    }
    rows[0].check = check_indexer(problem, got, ref_logits);
    rows[1].check = check_topk(problem, got);
    rows[2].check = check_attention(problem, got);
    if (chain_status.is_ok()) {
      // The chain's own selection lives in its workspace; with the same inputs it picks the same
      // rows as stage 2 (ties aside), so its output is held to the reference on those rows.
      SampledOutputs chain_got;
      chain_got.tokens = got.tokens;
      chain_got.indices = got.indices;
      const Status s = chain_out.download_tokens(got.tokens, &chain_got.out, &chain_got.lse, &chain_got.max_logits);
      if (!s.is_ok()) return fail("download", s);
      chain_row.check = check_attention(problem, chain_got);
    }
    std::printf(" done\n");
  }
  rows.push_back(chain_row);

  return print_stage_report(rows);
}

}  // namespace fp8dsa::cli
