// Top-k, k = 2048. Full rows (ks = 0, ke = N), logits roughly normal like real indexer scores,
// beside the CUB segmented-sort baseline of bench/topk_baseline.h; then prefill's causal rows beside
// the top-k kernels engines run (SGLang's, torch.topk: --sgl-topk, --torch-topk), on the same
// logits, each peer's selection checked for exactness against ours. Reported as time and memory
// rate (a top-k does no FLOPs worth counting).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "anchor_process.h"
#include "core/cuda_check.h"
#include "indexer_inputs.h"
#include "tools/device_random.h"
#include "tools/random_inputs.h"
#include "fp8dsa/topk.h"
#include "op_benches.h"
#include "topk_baseline.h"

namespace fp8dsa::bench {
namespace {

constexpr int kTopk = 2048;

struct TopkShape {
  int64_t rows;
  int64_t keys;
};

Status bench_topk_shape(const BenchContext& ctx, TopkShape shape) {
  const size_t logits_bytes = static_cast<size_t>(shape.rows) * shape.keys * sizeof(float);
  const int sets = tools::rotation_sets(logits_bytes, ctx.l2_bytes, 32);
  std::vector<tools::DeviceBytes> logits(static_cast<size_t>(sets));
  for (int s = 0; s < sets; ++s) {
    FP8DSA_RETURN_IF_ERROR(logits[static_cast<size_t>(s)].allocate(logits_bytes));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_normal(logits[static_cast<size_t>(s)].as<float>(), logits_bytes / 4,
                                              ctx.seed + 100 + s, 1.0f, ctx.stream));
  }
  tools::DeviceBytes ks, ke, indices;
  FP8DSA_RETURN_IF_ERROR(upload(std::vector<int32_t>(static_cast<size_t>(shape.rows), 0), &ks));
  FP8DSA_RETURN_IF_ERROR(
      upload(std::vector<int32_t>(static_cast<size_t>(shape.rows), static_cast<int32_t>(shape.keys)), &ke));
  FP8DSA_RETURN_IF_ERROR(indices.allocate(static_cast<size_t>(shape.rows) * kTopk * sizeof(int32_t)));

  TopkParams base;
  base.num_rows = shape.rows;
  base.num_keys = shape.keys;
  base.ks = ks.as<int32_t>();
  base.ke = ke.as<int32_t>();
  base.k = kTopk;
  base.indices = indices.as<int32_t>();
  base.stream = ctx.stream;
  tools::DeviceBytes workspace;
  FP8DSA_RETURN_IF_ERROR(workspace.allocate(topk_workspace_bytes(base)));
  base.workspace = workspace.get();
  base.workspace_bytes = workspace.bytes();

  const std::string shape_str = shape_string({{"T", shape.rows}, {"N", shape.keys}, {"k", kTopk}});
  // Bytes every top-k must move at least: the logits in, the indices out.
  const double bytes = static_cast<double>(logits_bytes) + 4.0 * static_cast<double>(shape.rows) * kTopk;

  ResultRow row;
  row.op = "topk";
  row.shape = shape_str;
  row.kernel = "fp8dsa::topk";
  auto launch = [&](int s) {
    TopkParams p = base;
    p.logits = logits[static_cast<size_t>(s)].as<float>();
    return topk(p);
  };
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, sets, launch, std::move(row),
                                         [&](double seconds, ResultRow& r) { r.gbps = bytes / seconds / 1e9; }));

  const int rows = static_cast<int>(shape.rows), cols = static_cast<int>(shape.keys);
  tools::DeviceBytes cub_workspace;
  FP8DSA_RETURN_IF_ERROR(cub_workspace.allocate(cub_sort_topk_workspace_bytes(rows, cols, kTopk)));
  ResultRow baseline;
  baseline.op = "topk";
  baseline.shape = shape_str + " baseline=cub_sort";
  baseline.kernel = "CUB segmented radix sort (baseline)";
  auto launch_cub = [&](int s) {
    return cuda_status(cub_sort_topk(logits[static_cast<size_t>(s)].as<float>(), shape.keys, rows, cols, kTopk,
                                     indices.as<int32_t>(), cub_workspace.get(), cub_workspace.bytes(),
                                     ctx.stream),
                       "cub_sort_topk");
  };
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, sets, launch_cub, std::move(baseline),
                                         [&](double seconds, ResultRow& r) { r.gbps = bytes / seconds / 1e9; }));
  return Status::ok();
}

// --- Prefill's causal rows beside the engines' top-k kernels --------------------------------------
// Row t of T = 4096 new tokens over N keys sees [0, N - T + t + 1). The logits are iid normal
// ("data=iid") or the indexer's own on random inputs at H = 64 ("data=indexer"), with -inf outside
// each row's window, one set for every kernel (the peers read files): the same bytes for all.

// Rows of `got` whose selection is not exact: a row is exact when its indices are distinct, inside
// the row's window, as many as the window holds up to k (the rest -1), and their logits are, as a
// multiset, those of `exact` (ties at the k-th value may pick either key).
int64_t inexact_rows(const std::vector<float>& logits, int64_t num_keys, const std::vector<int32_t>& ks,
                     const std::vector<int32_t>& ke, int k, const std::vector<int32_t>& exact,
                     const std::vector<int32_t>& got) {
  int64_t bad = 0;
  std::vector<int32_t> a, b;
  std::vector<float> va, vb;
  for (size_t t = 0; t < ks.size(); ++t) {
    const float* row = &logits[t * static_cast<size_t>(num_keys)];
    const int64_t want = std::min<int64_t>(k, ke[t] - ks[t]);
    a.clear();
    b.clear();
    for (int j = 0; j < k; ++j) {
      if (exact[t * k + j] >= 0) a.push_back(exact[t * k + j]);
      if (got[t * k + j] >= 0) b.push_back(got[t * k + j]);
    }
    std::sort(b.begin(), b.end());
    bool ok = static_cast<int64_t>(b.size()) == want && std::adjacent_find(b.begin(), b.end()) == b.end() &&
              (b.empty() || (b.front() >= ks[t] && b.back() < ke[t]));
    if (ok) {
      va.clear();
      vb.clear();
      for (int32_t i : a) va.push_back(row[i]);
      for (int32_t i : b) vb.push_back(row[i]);
      std::sort(va.begin(), va.end());
      std::sort(vb.begin(), vb.end());
      ok = va == vb;
    }
    bad += !ok;
  }
  return bad;
}

// Runs a peer's `io` command; its times as kernel_times reads them.
Status run_peer(const std::string& cmd, std::vector<KernelTime>* results) {
  int rc = 0;
  const std::string output = run_command(cmd, &rc);
  if (rc != 0) return invalid_argument("the top-k peer failed (" + cmd + "): " + output_tail(output, 300));
  *results = kernel_times(output);
  if (results->empty()) return invalid_argument("the top-k peer printed no time (" + cmd + ")");
  return Status::ok();
}

// The page-table form on the same rows (issue 57's floor: no more than 5% slower than the plain
// form): one sequence of 64-key pages in a shuffled order, as an engine's cache hands them out;
// every row maps through it. Its selection must be the plain one's, mapped key by key.
Status bench_page_table_form(const BenchContext& ctx, const TopkParams& plain, const std::vector<int32_t>& ks,
                             const std::string& shape, double plain_ms, const std::vector<int32_t>& plain_indices,
                             const std::function<void(double, ResultRow&)>& rate) {
  constexpr int kPageSize = 64;
  const int pages = static_cast<int>((plain.num_keys + kPageSize - 1) / kPageSize);
  std::vector<int32_t> table(static_cast<size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  tools::Random rng(ctx.seed + 77);
  std::shuffle(table.begin(), table.end(), rng.engine());
  tools::DeviceBytes page_table, row_seq, indices;
  FP8DSA_RETURN_IF_ERROR(upload(table, &page_table));
  FP8DSA_RETURN_IF_ERROR(upload(std::vector<int32_t>(static_cast<size_t>(plain.num_rows), 0), &row_seq));
  FP8DSA_RETURN_IF_ERROR(indices.allocate(plain_indices.size() * sizeof(int32_t)));
  TopkParams p = plain;
  p.indices = indices.as<int32_t>();
  p.page_table = page_table.as<int32_t>();
  p.num_seqs = 1;
  p.pages_per_seq = pages;
  p.page_size = kPageSize;
  p.row_seq = row_seq.as<int32_t>();

  ResultRow row;
  row.op = "topk";
  row.shape = shape + " page_table=" + std::to_string(kPageSize);
  row.kernel = "fp8dsa::topk (page-table form)";
  const size_t at = ctx.results->rows().size();
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, 1, [&](int) { return topk(p); }, row, rate));

  std::vector<int32_t> got(plain_indices.size());
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream));
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(got.data(), indices.get(), got.size() * 4, cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  std::vector<int32_t> want_row, got_row;
  for (int64_t t = 0; t < plain.num_rows; ++t) {
    want_row.clear();
    got_row.clear();
    for (int j = 0; j < plain.k; ++j) {
      const size_t cell = static_cast<size_t>(t) * plain.k + j;
      const int32_t key = plain_indices[cell];
      const int32_t pos = key - ks[static_cast<size_t>(t)];  // row_pos_base: ks
      want_row.push_back(key < 0 ? -1 : table[static_cast<size_t>(pos / kPageSize)] * kPageSize + pos % kPageSize);
      got_row.push_back(got[cell]);
    }
    std::sort(want_row.begin(), want_row.end());
    std::sort(got_row.begin(), got_row.end());
    bad += want_row != got_row;
  }
  ResultRow& r = ctx.results->row(at);
  char note[160];
  std::snprintf(note, sizeof(note), "x%.3f of the plain form's time; %s", r.ms / plain_ms,
                bad == 0 ? "the plain selection, mapped" : (std::to_string(bad) + " rows differ from the plain one, mapped").c_str());
  r.note = note;
  std::printf("  page table %s: %.4f ms, %s\n", shape.c_str(), r.ms, note);
  if (bad != 0) return invalid_argument("topk bench: the page-table form's selection is not the plain one's on " +
                                        std::to_string(bad) + " rows of " + shape);
  return Status::ok();
}

Status bench_causal_shape(const BenchContext& ctx, int64_t num_keys, bool indexer_logits_data) {
  constexpr int64_t kTokens = 4096;
  tools::CausalBounds bounds;
  FP8DSA_RETURN_IF_ERROR(tools::upload_causal_bounds(kTokens, num_keys - kTokens, &bounds));
  const size_t cells = static_cast<size_t>(kTokens) * num_keys;
  tools::DeviceBytes logits, indices, workspace;
  FP8DSA_RETURN_IF_ERROR(logits.allocate(cells * sizeof(float)));
  FP8DSA_RETURN_IF_ERROR(indices.allocate(static_cast<size_t>(kTokens) * kTopk * sizeof(int32_t)));
  if (indexer_logits_data) {
    std::vector<IndexerInputs> inputs;
    FP8DSA_RETURN_IF_ERROR(make_indexer_inputs(ctx, kTokens, num_keys, 64, 128, &inputs));
    IndexerParams scores = inputs[0].params(causal_indexer_shape(ctx, kTokens, num_keys, 64, 128, bounds));
    scores.logits = logits.as<float>();
    scores.fill_masked = true;
    FP8DSA_RETURN_IF_ERROR(indexer_logits(scores));
  } else {
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_normal(logits.as<float>(), cells, ctx.seed + 300, 1.0f, ctx.stream));
  }
  // The host copy with -inf outside every window, uploaded again: every kernel reads these bytes.
  std::vector<int32_t> ks(static_cast<size_t>(kTokens)), ke(static_cast<size_t>(kTokens));
  std::vector<float> host(cells);
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream));
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(ks.data(), bounds.ks.get(), ks.size() * 4, cudaMemcpyDeviceToHost));
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(ke.data(), bounds.ke.get(), ke.size() * 4, cudaMemcpyDeviceToHost));
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(host.data(), logits.get(), cells * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t t = 0; t < ks.size(); ++t) {
    float* row = &host[t * static_cast<size_t>(num_keys)];
    std::fill(row, row + ks[t], -INFINITY);
    std::fill(row + ke[t], row + num_keys, -INFINITY);
  }
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(logits.get(), host.data(), cells * sizeof(float), cudaMemcpyHostToDevice));

  TopkParams p;
  p.num_rows = kTokens;
  p.num_keys = num_keys;
  p.logits = logits.as<float>();
  p.ks = bounds.ks.as<int32_t>();
  p.ke = bounds.ke.as<int32_t>();
  p.k = kTopk;
  p.indices = indices.as<int32_t>();
  p.stream = ctx.stream;
  FP8DSA_RETURN_IF_ERROR(workspace.allocate(topk_workspace_bytes(p)));
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.bytes();

  const std::string shape = shape_string({{"T", kTokens}, {"N", num_keys}, {"k", kTopk}}, "causal") + " data=" +
                            (indexer_logits_data ? "indexer" : "iid");
  // Bytes every top-k must move at least: the windows' logits in, the indices out.
  const double bytes = 4.0 * static_cast<double>(bounds.valid_pairs) + 4.0 * kTokens * kTopk;
  const auto rate = [&](double seconds, ResultRow& r) { r.gbps = bytes / seconds / 1e9; };
  ResultRow row;
  row.op = "topk";
  row.shape = shape;
  row.kernel = "fp8dsa::topk";
  const size_t our_row = ctx.results->rows().size();
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, 1, [&](int) { return topk(p); }, row, rate));

  std::vector<int32_t> ours(static_cast<size_t>(kTokens) * kTopk);  // as the timed launches left them
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream));
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(ours.data(), indices.get(), ours.size() * 4, cudaMemcpyDeviceToHost));
  FP8DSA_RETURN_IF_ERROR(bench_page_table_form(ctx, p, ks, shape, ctx.results->row(our_row).ms, ours, rate));
  if (ctx.sgl_topk.empty() && ctx.torch_topk.empty()) return Status::ok();

  const std::string dir = ctx.anchor_dir + "/topk_io";
  FP8DSA_RETURN_IF_ERROR(make_directory(dir));
  if (!write_file(dir + "/logits.f32", host) || !write_file(dir + "/ks.i32", ks) || !write_file(dir + "/ke.i32", ke)) {
    return invalid_argument("cannot write the top-k peers' inputs to " + dir);
  }
  char args[512];
  std::snprintf(args, sizeof(args), " io --dir '%s' --T %lld --N %lld --k %d --iters %d", dir.c_str(),
                static_cast<long long>(kTokens), static_cast<long long>(num_keys), kTopk, std::max(ctx.timing.reps, 10));
  // (peer executable, its kernel name as printed -> baseline label, kernel text, indices file)
  struct Peer {
    const std::string* exe;
    const char* printed;
    const char* baseline;
    const char* kernel;
    const char* file;
  };
  const Peer peers[] = {
      {&ctx.sgl_topk, "fast_topk", "sgl_fast_topk_v2", "SGLang fast_topk (fast_topk_v2, unfused DSA top-k)",
       "sgl_fast_topk_indices.i32"},
      {&ctx.sgl_topk, "topk_v2", "sgl_topk_transform", "SGLang top-k v2, ragged transform (DSA prefill)",
       "sgl_topk_v2_indices.i32"},
      {&ctx.torch_topk, "", "torch_topk", "torch.topk over the masked logits", "torch_topk_indices.i32"},
  };
  std::vector<KernelTime> sgl, torch;
  const Status sgl_status = ctx.sgl_topk.empty() ? Status::ok() : run_peer("'" + ctx.sgl_topk + "'" + args, &sgl);
  const Status torch_status =
      ctx.torch_topk.empty() ? Status::ok() : run_peer("python3 '" + ctx.torch_topk + "'" + args, &torch);
  const ResultRow ours_row = ctx.results->row(our_row);
  double fastest_exact = NAN;
  for (const Peer& peer : peers) {
    if (peer.exe->empty()) continue;
    const bool is_torch = peer.exe == &ctx.torch_topk;
    const Status& status = is_torch ? torch_status : sgl_status;
    ResultRow r = ours_row;
    r.shape = shape + " baseline=" + peer.baseline;
    r.kernel = peer.kernel;
    r.vs_anchor = NAN;
    r.ms = r.tflops = r.gbps = NAN;
    const std::vector<KernelTime>& got = is_torch ? torch : sgl;
    const auto it = std::find_if(got.begin(), got.end(), [&](const KernelTime& g) { return g.name == peer.printed; });
    if (!status.is_ok() || it == got.end()) {
      r.note = status.is_ok() ? std::string("not in the peer's output") : status.to_string();
      ctx.results->add(r);
      continue;
    }
    r.ms = it->ms;
    r.gbps = bytes / (it->ms * 1e-3) / 1e9;
    std::vector<int32_t> theirs(ours.size());
    int64_t bad = -1;
    if (read_file(dir + "/" + peer.file, &theirs)) bad = inexact_rows(host, num_keys, ks, ke, kTopk, ours, theirs);
    r.note = bad < 0 ? "indices not read" : bad == 0 ? "exact" : std::to_string(bad) + " rows not exact";
    if (bad == 0 && !(it->ms >= fastest_exact)) fastest_exact = it->ms;
    std::printf("  same logits %s: %s %.4f ms (x%.3f of ours), %s\n", shape.c_str(), peer.baseline, it->ms,
                it->ms / ours_row.ms, r.note.c_str());
    ctx.results->add(r);
  }
  ctx.results->row(our_row).vs_anchor = fastest_exact / ours_row.ms;  // over the fastest exact peer
  return Status::ok();
}

}  // namespace

Status run_topk_bench(const BenchContext& ctx) {
  const std::vector<TopkShape> shapes =
      ctx.quick ? std::vector<TopkShape>{{4096, 32768}, {64, 131072}}
                : std::vector<TopkShape>{{4096, 8192}, {4096, 32768}, {8192, 65536}, {64, 131072}, {1, 1048576}};
  for (const TopkShape& shape : shapes) FP8DSA_RETURN_IF_ERROR(bench_topk_shape(ctx, shape));
  const std::vector<int64_t> causal_keys =
      ctx.quick ? std::vector<int64_t>{32768} : std::vector<int64_t>{8192, 32768, 131072};
  for (int64_t n : causal_keys)
    for (bool indexer_data : {false, true}) FP8DSA_RETURN_IF_ERROR(bench_causal_shape(ctx, n, indexer_data));
  return Status::ok();
}

}  // namespace fp8dsa::bench
