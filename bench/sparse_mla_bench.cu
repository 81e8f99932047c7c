// Sparse MLA prefill: T = 4096 tokens of one causal sequence over N latent rows (the last 4096 rows
// are the new tokens), topk = 2048 selected rows per token, on the realistic inputs of
// tools/mla_workload.h (selections in relevance order that overlap between neighbouring tokens,
// scores with a std of 3 across a token's keys; "data=peaked": std 10). FLOPs: 2 * h * (d_qk + d_v)
// per (token, valid selected row).
//
// With --flashmla=PATH (the anchor of ../shared/anchors), h = 64 and 128 also run FlashMLA's BF16
// kernel on the same inputs (e4m3 values are exact in bf16) through its `io` mode, in the same run:
// its row carries "baseline=flashmla_bf16", ours the speedup over it, and both kernels' accuracy
// against the f64 reference on every 64th token is printed. Both kernels are timed on one input set
// (the anchor's `io` mode takes one), so at N = 8K the 4.7 MB latent cache stays in L2 across
// repetitions for both.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/metrics.h"
#include "tools/sampled_mla_reference.h"
#include "tools/device_random.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "op_benches.h"
#include "tools/mla_workload.h"
#include "sparse_mla_common.h"

namespace fp8dsa::bench {
namespace {

constexpr int kDimQk = 576;
constexpr int kDimV = 512;

// One workload at h = 128 on the device; smaller h take its first heads.
struct MlaInputs {
  tools::MlaWorkload host;
  tools::DeviceBytes q, kv, indices;
};

// FlashMLA's `io` mode on the first h heads of the inputs (every e4m3 value is exact in bf16).
Status run_flashmla(const BenchContext& ctx, const MlaInputs& in, int h, double* ms, std::vector<uint16_t>* out,
                    std::vector<float>* lse, std::vector<float>* max_logits) {
  uint16_t to_bf16[256];
  for (int b = 0; b < 256; ++b) to_bf16[b] = float_to_bf16(e4m3_to_float(static_cast<uint8_t>(b)));
  std::vector<uint16_t> q(static_cast<size_t>(kMlaTokens) * h * kDimQk), kv(in.host.kv.size());
  for (int64_t t = 0; t < kMlaTokens; ++t)
    for (int i = 0; i < h * kDimQk; ++i) q[t * h * kDimQk + i] = to_bf16[in.host.q[t * kMlaMaxHeads * kDimQk + i]];
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = to_bf16[in.host.kv[i]];
  const FlashMlaInputs anchor_in{kMlaTokens, in.host.spec.num_kv, h, kMlaTopk, in.host.spec.sm_scale, &q, &kv,
                                 &in.host.indices};
  return run_flashmla_io(ctx, anchor_in, ms, out, lse, max_logits);
}

Status bench_shape(const BenchContext& ctx, const MlaInputs& in, int num_heads, const char* data) {
  const int64_t num_keys = in.host.spec.num_kv;
  MlaOutputs outputs;
  FP8DSA_RETURN_IF_ERROR(outputs.allocate(kMlaTokens, num_heads));
  SparseMlaParams p = tools::mla_params(in.host, num_heads);
  p.q = in.q.get();
  p.kv = in.kv.get();
  p.indices = in.indices.as<int32_t>();
  outputs.attach(&p);
  p.stream = ctx.stream;

  const double valid = static_cast<double>(in.host.valid_pairs);
  const double flops = 2.0 * num_heads * (kDimQk + kDimV) * valid;
  ResultRow row;
  row.op = "sparse_mla";
  row.shape = shape_string({{"T", kMlaTokens}, {"N", num_keys}, {"h", num_heads}, {"topk", kMlaTopk}}) +
              " data=" + data;
  row.kernel = sparse_mla_kernel_name(sparse_mla_route(p));
  const size_t our_row = ctx.results->rows().size();
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, 1, [&](int) { return sparse_mla_prefill(p); }, row,
                                         [&](double seconds, ResultRow& r) {
                                           r.tflops = flops / seconds / 1e12;
                                           r.gbps = (valid * kDimQk) / seconds / 1e9;  // gathered rows
                                         }));
  if (ctx.flashmla.empty() || (num_heads != 64 && num_heads != 128)) return Status::ok();

  // The anchor on the same inputs, and both kernels' accuracy.
  std::vector<uint16_t> ours_out;
  std::vector<float> ours_lse, ours_max;
  FP8DSA_RETURN_IF_ERROR(outputs.download(&ours_out, &ours_lse, &ours_max));
  double anchor_ms = NAN;
  std::vector<uint16_t> fm_out;
  std::vector<float> fm_lse, fm_max;
  ResultRow anchor = row;
  anchor.shape += " baseline=flashmla_bf16";
  anchor.kernel = "FlashMLA SM90 sparse prefill (BF16)";
  const Status fm = run_flashmla(ctx, in, num_heads, &anchor_ms, &fm_out, &fm_lse, &fm_max);
  if (!fm.is_ok()) {
    anchor.note = fm.to_string();
    ctx.results->add(anchor);
    return Status::ok();
  }
  anchor.ms = anchor_ms;
  anchor.tflops = flops / (anchor_ms * 1e-3) / 1e12;
  anchor.gbps = (valid * kDimQk * 2) / (anchor_ms * 1e-3) / 1e9;
  ctx.results->add(anchor);
  ResultRow& ours = ctx.results->row(our_row);
  ours.vs_anchor = anchor_ms / ours.ms;

  tools::SampledMlaReference ref;
  FP8DSA_RETURN_IF_ERROR(ref.build(tools::mla_params(in.host, num_heads), kMlaCheckEvery));
  std::printf("  inputs %s: %s\n", row.shape.c_str(), in.host.describe().c_str());
  print_mla_accuracy("fp8dsa", row.shape, ref.check(ours_out.data(), ours_lse.data(), ours_max.data()));
  print_mla_accuracy("flashmla_bf16", row.shape, ref.check(fm_out.data(), fm_lse.data(), fm_max.data()));
  return Status::ok();
}

Status make_inputs(const BenchContext& ctx, int64_t num_keys, double score_std, MlaInputs* in) {
  in->host = make_bench_workload(ctx, num_keys, score_std);
  FP8DSA_RETURN_IF_ERROR(upload(in->host.q, &in->q));
  FP8DSA_RETURN_IF_ERROR(upload(in->host.kv, &in->kv));
  return upload(in->host.indices, &in->indices);
}

}  // namespace

Status run_sparse_mla_bench(const BenchContext& ctx) {
  const std::vector<int64_t> keys =
      ctx.quick ? std::vector<int64_t>{32768} : std::vector<int64_t>{8192, 32768, 65536, 131072};
  const std::vector<int> heads = ctx.quick ? std::vector<int>{128, 64, 16} : std::vector<int>{128, 64, 32, 16};
  for (int64_t n : keys) {
    MlaInputs in;
    FP8DSA_RETURN_IF_ERROR(make_inputs(ctx, n, 3.0, &in));
    for (int h : heads) FP8DSA_RETURN_IF_ERROR(bench_shape(ctx, in, h, "realistic"));
    if (n == 32768) {  // peaked attention at the floor's shape
      MlaInputs peaked;
      FP8DSA_RETURN_IF_ERROR(make_inputs(ctx, n, 10.0, &peaked));
      for (int h : {128, 64}) FP8DSA_RETURN_IF_ERROR(bench_shape(ctx, peaked, h, "peaked"));
    }
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
