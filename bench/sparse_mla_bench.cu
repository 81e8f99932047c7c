// Sparse MLA prefill: T = 4096 tokens of one causal sequence over N latent rows (the last 4096 rows
// are the new tokens), topk = 2048 selected rows per token, on the realistic inputs of
// tools/mla_workload.h (selections in relevance order that overlap between neighbouring tokens,
// scores with a std of 3 across a token's keys; "data=peaked": std 10). FLOPs: 2 * h * (d_qk + d_v)
// per (token, valid selected row).
//
// Input sets (data=): the realistic inputs (std 3) and peaked ones (std 10), random-valued q / kv
// whose scores do not follow the selection order (std 3.5, 1 and 10: random, random_std1,
// random_std10) and zeros, all over the realistic selections.
//
// With --flashmla=PATH and --q8kv8=PATH (the anchors of ../shared/anchors), h = 64 and 128 also run
// FlashMLA's BF16 kernel (e4m3 values are exact in bf16) and SGLang's FP8 kernel on the same inputs
// through their `io` modes, in the same run: their rows carry "baseline=flashmla_bf16" and
// "baseline=q8kv8", ours the speedup over FlashMLA; h = 16 and 32 run beside FlashMLA at 64 heads, q
// padded with zero heads as engines pad those shards ("baseline=flashmla_bf16_pad64", the same FLOPs
// counted as ours). Every kernel's accuracy on every 64th token
// is printed twice: against the f64 reference on its inputs (SPEC 6's absolute bound) and against
// the rounding of the inputs (R0 / Rq). All kernels are timed on one input set (the anchors' `io`
// modes take one), so at N = 8K the 4.7 MB latent cache stays in L2 across repetitions for all.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tools/metrics.h"
#include "tools/sampled_mla_reference.h"
#include "tools/device_random.h"
#include "fp8dsa/sparse_mla.h"
#include "op_benches.h"
#include "tools/mla_workload.h"
#include "sparse_mla/launch.h"
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

// The first h heads of q [T, kMlaMaxHeads, 576] e4m3, packed, each byte through `convert`.
template <typename T, typename F>
std::vector<T> first_heads(const MlaInputs& in, int h, F convert) {
  std::vector<T> q(static_cast<size_t>(kMlaTokens) * h * kDimQk);
  for (int64_t t = 0; t < kMlaTokens; ++t)
    for (int i = 0; i < h * kDimQk; ++i) q[t * h * kDimQk + i] = convert(in.host.q[t * kMlaMaxHeads * kDimQk + i]);
  return q;
}

// FlashMLA's `io` mode on the first h heads of the inputs (every e4m3 value is exact in bf16).
Status run_flashmla(const BenchContext& ctx, const MlaInputs& in, int h, double* ms, std::vector<uint16_t>* out,
                    std::vector<float>* lse, std::vector<float>* max_logits) {
  const std::vector<uint16_t> q = first_heads<uint16_t>(in, h, [](uint8_t b) { return bf16_of_e4m3(b); });
  const std::vector<uint16_t> kv = bf16_of_e4m3(in.host.kv);
  const FlashMlaInputs anchor_in{kMlaTokens, in.host.spec.num_kv, h, kMlaTopk, in.host.spec.sm_scale, &q, &kv,
                                 &in.host.indices};
  return run_flashmla_io(ctx, anchor_in, ms, out, lse, max_logits);
}

// FlashMLA as engines run it for a small-head shard (h = 16 or 32, TP8 / TP4): q padded with zero
// heads to 64, the kernel's smallest, and the first h heads of its output kept (the accuracy lines
// read only those).
Status run_flashmla_pad64(const BenchContext& ctx, const MlaInputs& in, int h, double* ms, std::vector<uint16_t>* out,
                          std::vector<float>* lse, std::vector<float>* max_logits) {
  constexpr int kPadded = 64;
  const std::vector<uint16_t> q_h = first_heads<uint16_t>(in, h, [](uint8_t b) { return bf16_of_e4m3(b); });
  std::vector<uint16_t> q(static_cast<size_t>(kMlaTokens) * kPadded * kDimQk, 0);  // bf16 +0
  for (int64_t t = 0; t < kMlaTokens; ++t)
    std::copy_n(q_h.begin() + t * h * kDimQk, h * kDimQk, q.begin() + t * kPadded * kDimQk);
  const std::vector<uint16_t> kv = bf16_of_e4m3(in.host.kv);
  const FlashMlaInputs anchor_in{kMlaTokens, in.host.spec.num_kv, kPadded, kMlaTopk, in.host.spec.sm_scale, &q, &kv,
                                 &in.host.indices};
  std::vector<uint16_t> out64;
  std::vector<float> lse64, max64;
  FP8DSA_RETURN_IF_ERROR(run_flashmla_io(ctx, anchor_in, ms, &out64, &lse64, &max64));
  out->assign(static_cast<size_t>(kMlaTokens) * h * kDimV, 0);
  lse->assign(static_cast<size_t>(kMlaTokens) * h, 0.0f);
  max_logits->assign(static_cast<size_t>(kMlaTokens) * h, 0.0f);
  for (int64_t t = 0; t < kMlaTokens; ++t) {
    std::copy_n(out64.begin() + t * kPadded * kDimV, h * kDimV, out->begin() + t * h * kDimV);
    std::copy_n(lse64.begin() + t * kPadded, h, lse->begin() + t * h);
    if (!max64.empty()) std::copy_n(max64.begin() + t * kPadded, h, max_logits->begin() + t * h);
  }
  if (max64.empty()) max_logits->clear();
  return Status::ok();
}

// SGLang's FP8 kernel on the same e4m3 bytes.
Status run_q8kv8(const BenchContext& ctx, const MlaInputs& in, int h, double* ms, std::vector<uint16_t>* out,
                 std::vector<float>* lse, std::vector<float>* max_logits) {
  const std::vector<uint8_t> q = first_heads<uint8_t>(in, h, [](uint8_t b) { return b; });
  const Q8kv8Inputs anchor_in{kMlaTokens, in.host.spec.num_kv, h, kMlaTopk, in.host.spec.sm_scale, &q, &in.host.kv,
                              &in.host.indices};
  return run_q8kv8_io(ctx, anchor_in, ms, out, lse, max_logits);
}

struct AnchorOutputs {
  std::vector<uint16_t> out;
  std::vector<float> lse, max_logits;
};

using AnchorRunner = Status (*)(const BenchContext&, const MlaInputs&, int, double*, std::vector<uint16_t>*,
                                std::vector<float>*, std::vector<float>*);

// Times one anchor on the inputs and adds its row (our row's shape + " baseline=<name>"); returns
// its time (NaN if it failed: the row then carries the reason).
double time_anchor(const BenchContext& ctx, const MlaInputs& in, int h, const ResultRow& ours, const char* baseline,
                   const char* kernel, double flops, double bytes_per_pair, AnchorRunner run, AnchorOutputs* got) {
  ResultRow anchor = ours;
  anchor.shape += std::string(" baseline=") + baseline;
  anchor.kernel = kernel;
  anchor.vs_anchor = NAN;
  double ms = NAN;
  const Status s = run(ctx, in, h, &ms, &got->out, &got->lse, &got->max_logits);
  if (!s.is_ok()) {
    anchor.note = s.to_string();
    anchor.ms = anchor.tflops = anchor.gbps = NAN;
    ctx.results->add(anchor);
    return NAN;
  }
  anchor.ms = ms;
  anchor.tflops = flops / (ms * 1e-3) / 1e12;
  anchor.gbps = (static_cast<double>(in.host.valid_pairs) * bytes_per_pair) / (ms * 1e-3) / 1e9;
  ctx.results->add(anchor);
  return ms;
}

Status bench_shape(const BenchContext& ctx, const MlaInputs& in, int num_heads, const char* data) {
  const char* selection = tools::mla_selection_name(in.host.spec.selection);
  const int64_t num_keys = in.host.spec.num_kv;
  tools::MlaDeviceOutputs outputs;
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
              " data=" + data + " sel=" + selection;
  row.kernel = sparse_mla_kernel_name(sparse_mla_route(p));
  const size_t our_row = ctx.results->rows().size();
  FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, 1, [&](int) { return sparse_mla_prefill(p); }, row,
                                         [&](double seconds, ResultRow& r) {
                                           r.tflops = flops / seconds / 1e12;
                                           r.gbps = (valid * kDimQk) / seconds / 1e9;  // gathered rows
                                         }));
  std::vector<std::pair<std::string, AnchorOutputs>> ours;  // (who, outputs) for the accuracy lines
  const bool anchors = (num_heads == 64 || num_heads == 128) && (!ctx.flashmla.empty() || !ctx.q8kv8.empty());
  // h = 16 and 32 beside FlashMLA at 64 heads, as engines pad those shards.
  const bool padded_anchor = (num_heads == 16 || num_heads == 32) && !ctx.flashmla.empty();
  if (anchors || padded_anchor || !ctx.mla_qk_chains.empty()) {
    ours.emplace_back("fp8dsa", AnchorOutputs{});
    FP8DSA_RETURN_IF_ERROR(outputs.download(&ours[0].second.out, &ours[0].second.lse, &ours[0].second.max_logits));
  }
#if defined(FP8DSA_TUNING)
  // A tuning variant on the same inputs: its row ("<label>" appended to ours) and its outputs for
  // the accuracy lines.
  const auto time_variant = [&](const std::string& label, const detail::sparse_mla::Fp8Tuning& tuning) -> Status {
    ResultRow variant = row;
    variant.shape += " " + label;
    variant.kernel += " " + label;
    FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, 1, [&](int) { return detail::sparse_mla::launch_sparse_mla_fp8(p, tuning); },
                                           variant, [&](double seconds, ResultRow& r) {
                                             r.tflops = flops / seconds / 1e12;
                                             r.gbps = (valid * kDimQk) / seconds / 1e9;
                                           }));
    ours.emplace_back(label, AnchorOutputs{});
    AnchorOutputs& o = ours.back().second;
    return outputs.download(&o.out, &o.lse, &o.max_logits);
  };
  // The other QK^T chain counts (rows "qk_chains=N").
  for (int chains : ctx.mla_qk_chains) {
    if (chains == detail::sparse_mla::kDefaultQkChains || num_heads < 32) continue;
    FP8DSA_RETURN_IF_ERROR(time_variant("qk_chains=" + std::to_string(chains),
                                        {chains, detail::sparse_mla::SmallHeads::kDefault}));
  }
#endif
  if (ours.empty()) return Status::ok();

  // The anchors on the same inputs, and every kernel's accuracy.
  const ResultRow ours_row = ctx.results->row(our_row);
  AnchorOutputs fm, q8;
  if (anchors) {
    double fm_ms = NAN, q8_ms = NAN;
    if (!ctx.flashmla.empty()) {
      fm_ms = time_anchor(ctx, in, num_heads, ours_row, "flashmla_bf16", "FlashMLA SM90 sparse prefill (BF16)", flops,
                          2.0 * kDimQk, run_flashmla, &fm);
    }
    if (!ctx.q8kv8.empty()) {
      q8_ms = time_anchor(ctx, in, num_heads, ours_row, "q8kv8", "SGLang Q8KV8 SM90 sparse prefill (FP8)", flops,
                          kDimQk, run_q8kv8, &q8);
    }
    ResultRow& r = ctx.results->row(our_row);
    r.vs_anchor = fm_ms / r.ms;  // the CSV's one ratio column is FlashMLA's; both are printed here
    std::printf("  same inputs %s: fp8dsa %.3f ms, FlashMLA BF16 %.3f ms (x%.3f), Q8KV8 %.3f ms (x%.3f)\n",
                r.shape.c_str(), r.ms, fm_ms, fm_ms / r.ms, q8_ms, q8_ms / r.ms);
  }
  if (padded_anchor) {
    // FLOPs and bytes as ours (the padded heads are not useful work): its TFLOPS column compares.
    const double fm_ms = time_anchor(ctx, in, num_heads, ours_row, "flashmla_bf16_pad64",
                                     "FlashMLA SM90 sparse prefill (BF16), q padded to 64 heads", flops,
                                     2.0 * kDimQk, run_flashmla_pad64, &fm);
    ResultRow& r = ctx.results->row(our_row);
    r.vs_anchor = fm_ms / r.ms;
    std::printf("  same inputs %s: fp8dsa %.3f ms, FlashMLA BF16 at 64 padded heads %.3f ms (x%.3f)\n",
                r.shape.c_str(), r.ms, fm_ms, fm_ms / r.ms);
  }

  tools::SampledMlaReference ref;
  const bool unrounded = !in.host.q_unrounded.empty();
  const SparseMlaParams problem = tools::mla_params(in.host, num_heads);
  FP8DSA_RETURN_IF_ERROR(ref.build(problem, kMlaCheckEvery, unrounded ? in.host.q_unrounded.data() : nullptr,
                                   problem.q_token_stride,  // q_unrounded holds the sampled tokens only
                                   unrounded ? in.host.kv_unrounded.data() : nullptr));
  std::printf("  inputs %s: %s\n", row.shape.c_str(), in.host.describe().c_str());
  const auto report = [&](const std::string& who, const AnchorOutputs& o) {
    if (o.out.empty()) return;
    print_mla_accuracy(who.c_str(), row.shape, ref.check(o.out.data(), o.lse.data(), o.max_logits.data()), unrounded);
    if (unrounded) {
      print_rounding_accuracy(who.c_str(), row.shape,
                              ref.check_against_rounding(o.out.data(), o.lse.data(), o.max_logits.data()));
    }
  };
  for (const auto& [who, o] : ours) report(who, o);
  report(padded_anchor ? "flashmla_bf16_pad64" : "flashmla_bf16", fm);
  report("q8kv8", q8);
  return Status::ok();
}

Status make_inputs(const BenchContext& ctx, int64_t num_keys, const MlaDataSet& set, tools::MlaSelection selection,
                   bool unrounded, MlaInputs* in) {
  in->host = make_bench_workload(ctx, num_keys, set.score_std, set.values,
                                 unrounded && set.values != tools::MlaValues::kZeros, selection);
  FP8DSA_RETURN_IF_ERROR(upload(in->host.q, &in->q));
  FP8DSA_RETURN_IF_ERROR(upload(in->host.kv, &in->kv));
  return upload(in->host.indices, &in->indices);
}

}  // namespace

Status run_sparse_mla_bench(const BenchContext& ctx) {
  std::vector<int64_t> keys = ctx.mla_keys;
  if (keys.empty()) keys = ctx.quick ? std::vector<int64_t>{32768} : std::vector<int64_t>{8192, 32768, 131072, 262144};
  std::vector<tools::MlaSelection> selections = ctx.mla_selections;
  if (selections.empty()) selections = {tools::MlaSelection::kRealistic, tools::MlaSelection::kUniform};
  // Every input set at every head count: the small-head kernels' time must not depend on the data
  // either (SPEC 7).
  std::vector<int> heads = ctx.quick ? std::vector<int>{128, 64, 16, 8} : std::vector<int>{128, 64, 32, 16, 8};
  if (!ctx.mla_heads.empty()) heads = ctx.mla_heads;
  const bool anchors = !ctx.flashmla.empty() || !ctx.q8kv8.empty();
  for (const std::string& name : ctx.mla_data) {
    if (!is_mla_data_set(name)) return invalid_argument("sparse_mla bench: unknown input set '" + name + "'");
  }
  for (int64_t n : keys) {
    for (tools::MlaSelection selection : selections) {
      for (const MlaDataSet& set : kMlaDataSets) {
        const bool realistic = std::string(set.label) == "realistic";
        if (!mla_data_wanted(ctx, set) || (n != 32768 && !realistic)) continue;
        MlaInputs in;
        FP8DSA_RETURN_IF_ERROR(make_inputs(ctx, n, set, selection, anchors || !ctx.mla_qk_chains.empty(), &in));
        for (int h : heads) {
          FP8DSA_RETURN_IF_ERROR(bench_shape(ctx, in, h, set.label));
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
