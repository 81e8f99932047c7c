// Sparse MLA prefill from DeepSeek-V3.2's 656-byte FP8 cache rows with bf16 queries
// (KvFormat::kDeepSeekV32): T = 4096, topk = 2048, on the inputs of the sparse_mla bench in that
// format (tools/v32_rows.h: per-(row, block) scales varying lognormally): realistic, peaked,
// random-valued (scores unrelated to the selection order; std 3.5, 1 and 10) and zeros. FLOPs as for
// sparse_mla: 2 * h * (576 + 512) per (token, valid selected row). Ours runs with q as 2 and as 1
// e4m3 terms (SparseMlaParams::q_terms; "q_terms=2" / "q_terms=1" in the shape); the anchors' rows
// carry the shape without it.
//
// At h = 64 and 128, on the same inputs in the same run, the paths engines take today (issue 55),
// each printed beside our two rows with its accuracy against the f64 reference on the dequantised
// rows (every 64th token):
//   --flashmla=PATH     the dequantisation pass over the N cache rows (timed here,
//                       "baseline=dequantize_pass") plus FlashMLA's BF16 kernel on the dequantised
//                       rows ("baseline=flashmla_bf16"; our rows' vs-anchor ratio), together
//                       "baseline=dequant+flashmla_bf16";
//   --flashmla-kv=PATH  FlashMLA's FP8-cache sparse decode kernel run as prefill on the rows as they
//                       are ("baseline=flashmla_kv"; it returns no max_logits);
//   --q8kv8=PATH        the rows requantised to unit-scale e4m3 (timed, "baseline=requantize_pass")
//                       and q cast to e4m3 (not timed), then SGLang's Q8KV8 ("baseline=q8kv8"),
//                       together "baseline=requant+q8kv8".
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sparse_mla_common.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "op_benches.h"
#include "tools/device_buffer.h"
#include "tools/mla_workload.h"
#include "tools/sampled_mla_reference.h"
#include "tools/v32_rows.h"
#include "v32_dequantize.h"

namespace fp8dsa::bench {
namespace {

constexpr int kDimQk = 576;
constexpr int kDimV = 512;

struct V32Inputs {
  tools::MlaWorkload host;
  tools::V32Workload v32;
  tools::DeviceBytes q, kv, indices, kv_bf16;
};

Status make_inputs(const BenchContext& ctx, int64_t num_keys, const MlaDataSet& set, V32Inputs* in) {
  in->host = make_bench_workload(ctx, num_keys, set.score_std, set.values);
  in->v32 = tools::make_v32_workload(in->host, in->host.spec.seed + 1);
  FP8DSA_RETURN_IF_ERROR(upload(in->v32.q_bf16, &in->q));
  FP8DSA_RETURN_IF_ERROR(upload(in->v32.kv, &in->kv));
  FP8DSA_RETURN_IF_ERROR(in->kv_bf16.allocate(static_cast<size_t>(num_keys) * kDimQk * 2));
  return upload(in->host.indices, &in->indices);
}

// The first h heads of the [T, 128, 576] bf16 queries, packed for the anchor.
std::vector<uint16_t> first_heads(const std::vector<uint16_t>& q, int h) {
  std::vector<uint16_t> out(static_cast<size_t>(kMlaTokens) * h * kDimQk);
  for (int64_t t = 0; t < kMlaTokens; ++t)
    for (int i = 0; i < h * kDimQk; ++i) out[t * h * kDimQk + i] = q[t * kMlaMaxHeads * kDimQk + i];
  return out;
}

Status bench_shape(const BenchContext& ctx, const V32Inputs& in, int num_heads, const char* data) {
  const int64_t num_keys = in.host.spec.num_kv;
  tools::MlaDeviceOutputs outputs;
  FP8DSA_RETURN_IF_ERROR(outputs.allocate(kMlaTokens, num_heads));
  SparseMlaParams p = tools::v32_mla_params(in.host, in.v32, num_heads);
  p.q = in.q.get();
  p.kv = in.kv.get();
  p.indices = in.indices.as<int32_t>();
  outputs.attach(&p);
  p.stream = ctx.stream;

  const double valid = static_cast<double>(in.host.valid_pairs);
  const double flops = 2.0 * num_heads * (kDimQk + kDimV) * valid;
  ResultRow row;
  row.op = "sparse_mla_v32";
  row.shape = shape_string({{"T", kMlaTokens}, {"N", num_keys}, {"h", num_heads}, {"topk", kMlaTopk}}) +
              " data=" + data;
  row.kernel = std::string(sparse_mla_kernel_name(sparse_mla_route(p))) + " (656-byte rows, bf16 q)";
  const bool anchors = (num_heads == 64 || num_heads == 128) &&
                       !(ctx.flashmla.empty() && ctx.flashmla_kv.empty() && ctx.q8kv8.empty());
  constexpr int kQTerms[2] = {2, 1};
  size_t our_rows[2];
  std::vector<uint16_t> ours_out[2];
  std::vector<float> ours_lse[2], ours_max[2];
  for (int i = 0; i < 2; ++i) {
    p.q_terms = kQTerms[i];
    ResultRow ours = row;
    ours.shape += " q_terms=" + std::to_string(kQTerms[i]);
    our_rows[i] = ctx.results->rows().size();
    FP8DSA_RETURN_IF_ERROR(time_and_record(ctx, 1, [&](int) { return sparse_mla_prefill(p); }, ours,
                                           [&](double seconds, ResultRow& r) {
                                             r.tflops = flops / seconds / 1e12;
                                             r.gbps = (valid * kV32RowBytes) / seconds / 1e9;
                                           }));
    if (anchors) FP8DSA_RETURN_IF_ERROR(outputs.download(&ours_out[i], &ours_lse[i], &ours_max[i]));
  }
  if (!anchors) return Status::ok();

  tools::SampledMlaReference ref;
  SparseMlaParams host = tools::v32_mla_params(in.host, in.v32, num_heads);
  FP8DSA_RETURN_IF_ERROR(ref.build(host, kMlaCheckEvery));
  std::printf("  inputs %s: %s\n", row.shape.c_str(), in.host.describe().c_str());
  for (int i = 0; i < 2; ++i) {
    print_mla_accuracy(kQTerms[i] == 2 ? "fp8dsa q_terms=2" : "fp8dsa q_terms=1", row.shape,
                       ref.check(ours_out[i].data(), ours_lse[i].data(), ours_max[i].data()));
  }
  // Our two rows' ratio to an anchor path (the conversion pass counted where there is one).
  const auto beside = [&](const char* what, double path_ms) {
    for (const size_t our_row : our_rows) {
      ResultRow& ours = ctx.results->row(our_row);
      std::printf("  %s: %.3f ms; %s %.3f ms (%.3fx)\n", ours.shape.c_str(), ours.ms, what, path_ms, path_ms / ours.ms);
    }
  };
  const std::vector<uint16_t> q = first_heads(in.v32.q_bf16, num_heads);
  // An anchor's own row and, with a conversion pass, the row of the pass plus the anchor.
  const auto add_anchor = [&](const char* baseline, const char* kernel, double ms, const std::string& note) {
    ResultRow a = row;
    a.shape += std::string(" baseline=") + baseline;
    a.kernel = kernel;
    a.ms = ms;
    a.tflops = std::isnan(ms) ? NAN : flops / (ms * 1e-3) / 1e12;
    a.note = note;
    ctx.results->add(a);
  };

  // A conversion pass over the N cache rows, timed on this device (baseline=<baseline>, GB/s of the
  // rows read and out_bytes a row written); returns its row's index.
  const auto time_pass = [&](const char* baseline, const char* kernel, double out_bytes, auto&& launch,
                             size_t* pass_row) {
    ResultRow pass = row;
    pass.shape += std::string(" baseline=") + baseline;
    pass.kernel = kernel;
    *pass_row = ctx.results->rows().size();
    return time_and_record(ctx, 1, [&](int) { return launch(); }, pass, [&](double seconds, ResultRow& r) {
      r.gbps = num_keys * (kV32RowBytes + out_bytes) / seconds / 1e9;
    });
  };

  if (!ctx.flashmla.empty()) {
    // The engines' dequantisation pass over the N cache rows, timed on this device, then FlashMLA's
    // BF16 kernel on the dequantised rows.
    size_t dequant_row = 0;
    FP8DSA_RETURN_IF_ERROR(time_pass("dequantize_pass", "656-byte rows -> bf16 [N, 576]", 2.0 * kDimQk, [&] {
      return dequantize_v32_rows(in.kv.as<uint8_t>(), num_keys, kV32RowBytes, in.kv_bf16.as<uint16_t>(), ctx.stream);
    }, &dequant_row));
    double anchor_ms = NAN;
    std::vector<uint16_t> fm_out;
    std::vector<float> fm_lse, fm_max;
    const FlashMlaInputs anchor_in{kMlaTokens, num_keys, num_heads, kMlaTopk, in.host.spec.sm_scale, &q,
                                   &in.v32.kv_dequant_bf16, &in.host.indices};
    const Status fm = run_flashmla_io(ctx, anchor_in, &anchor_ms, &fm_out, &fm_lse, &fm_max);
    add_anchor("flashmla_bf16", "FlashMLA SM90 sparse prefill (BF16) on pre-dequantised rows", anchor_ms,
               fm.is_ok() ? "" : fm.to_string());
    if (fm.is_ok()) {
      const double path_ms = anchor_ms + ctx.results->row(dequant_row).ms;
      add_anchor("dequant+flashmla_bf16", "dequantize pass + FlashMLA BF16", path_ms, "");
      for (const size_t our_row : our_rows) {
        ResultRow& ours = ctx.results->row(our_row);
        ours.vs_anchor = anchor_ms / ours.ms;
        char note[96];
        std::snprintf(note, sizeof(note), "%.3fx dequant+FlashMLA", path_ms / ours.ms);
        ours.note = note;
      }
      beside("dequantize + FlashMLA BF16", path_ms);
      print_mla_accuracy("flashmla_bf16", row.shape, ref.check(fm_out.data(), fm_lse.data(), fm_max.data()));
    }
  }

  if (!ctx.flashmla_kv.empty()) {
    // FlashMLA's FP8-cache sparse decode kernel as prefill, on the rows as they are (no pass).
    double kv_ms = NAN;
    std::vector<uint16_t> kv_out;
    std::vector<float> kv_lse, kv_max;
    const FlashMlaKvInputs kv_in{kMlaTokens, num_keys, num_heads, kMlaTopk, in.host.spec.sm_scale, &q,
                                 &in.v32.kv, &in.host.indices};
    const Status st = run_flashmla_kv_io(ctx, kv_in, &kv_ms, &kv_out, &kv_lse, &kv_max);
    add_anchor("flashmla_kv", "FlashMLA SM90 FP8-cache sparse decode as prefill (bf16 MMA)", kv_ms,
               st.is_ok() ? "" : st.to_string());
    if (st.is_ok()) {
      beside("FlashMLA FP8-cache decode", kv_ms);
      print_mla_accuracy("flashmla_kv", row.shape, ref.check(kv_out.data(), kv_lse.data(), nullptr));
    }
  }

  if (!ctx.q8kv8.empty()) {
    // The rows requantised to unit-scale e4m3 (the pass timed and counted) and q cast to e4m3 at
    // scale 1 (not counted: an engine can fold it into the op that writes q), then SGLang's Q8KV8.
    tools::DeviceBytes kv_e4m3;
    FP8DSA_RETURN_IF_ERROR(kv_e4m3.allocate(static_cast<size_t>(num_keys) * kDimQk));
    size_t requant_row = 0;
    FP8DSA_RETURN_IF_ERROR(time_pass("requantize_pass", "656-byte rows -> unit-scale e4m3 [N, 576]", 1.0 * kDimQk, [&] {
      return requantize_v32_rows(in.kv.as<uint8_t>(), num_keys, kV32RowBytes, kv_e4m3.as<uint8_t>(), ctx.stream);
    }, &requant_row));
    std::vector<uint8_t> kv_host, q_host(q.size());
    FP8DSA_RETURN_IF_ERROR(kv_e4m3.download(&kv_host));
    for (size_t i = 0; i < q.size(); ++i) q_host[i] = float_to_e4m3(bf16_to_float(q[i]));
    double q8_ms = NAN;
    std::vector<uint16_t> q8_out;
    std::vector<float> q8_lse, q8_max;
    const Q8kv8Inputs q8_in{kMlaTokens, num_keys, num_heads, kMlaTopk, in.host.spec.sm_scale, &q_host, &kv_host,
                            &in.host.indices};
    const Status st = run_q8kv8_io(ctx, q8_in, &q8_ms, &q8_out, &q8_lse, &q8_max);
    add_anchor("q8kv8", "SGLang Q8KV8 (FP8 sparse prefill) on requantised rows, q cast to e4m3", q8_ms,
               st.is_ok() ? "" : st.to_string());
    if (st.is_ok()) {
      const double path_ms = q8_ms + ctx.results->row(requant_row).ms;
      add_anchor("requant+q8kv8", "requantize pass + SGLang Q8KV8", path_ms, "");
      beside("requantize + Q8KV8", path_ms);
      print_mla_accuracy("requant+q8kv8", row.shape, ref.check(q8_out.data(), q8_lse.data(), q8_max.data()));
    }
  }
  return Status::ok();
}

}  // namespace

Status run_sparse_mla_v32_bench(const BenchContext& ctx) {
  const std::vector<int64_t> keys = ctx.quick ? std::vector<int64_t>{32768} : std::vector<int64_t>{8192, 32768, 131072};
  for (int64_t n : keys) {
    for (const MlaDataSet& set : kMlaDataSets) {
      const bool realistic = std::string(set.label) == "realistic";
      if (!mla_data_wanted(ctx, set) || (n != 32768 && !realistic)) continue;
      V32Inputs in;
      FP8DSA_RETURN_IF_ERROR(make_inputs(ctx, n, set, &in));
      for (int h : realistic ? std::vector<int>{128, 64, 16} : std::vector<int>{128, 64}) {
        FP8DSA_RETURN_IF_ERROR(bench_shape(ctx, in, h, set.label));
      }
    }
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
