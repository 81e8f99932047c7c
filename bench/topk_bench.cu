// Top-k: full rows (ks = 0, ke = N), k = 2048, logits roughly normal like real indexer scores.
// Reported as time and memory rate (a top-k does no FLOPs worth counting), beside the CUB
// segmented-sort baseline of bench/topk_baseline.h when that is built in.
#include <vector>

#include "core/cuda_check.h"
#include "tools/device_random.h"
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

}  // namespace

Status run_topk_bench(const BenchContext& ctx) {
  const std::vector<TopkShape> shapes =
      ctx.quick ? std::vector<TopkShape>{{4096, 32768}, {64, 131072}}
                : std::vector<TopkShape>{{4096, 8192}, {4096, 32768}, {8192, 65536}, {64, 131072}, {1, 1048576}};
  for (const TopkShape& shape : shapes) FP8DSA_RETURN_IF_ERROR(bench_topk_shape(ctx, shape));
  return Status::ok();
}

}  // namespace fp8dsa::bench
