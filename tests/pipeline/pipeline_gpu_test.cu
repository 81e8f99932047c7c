// prefill() on the GPU: against the CPU references stage by stage, against the three stages run
// one by one, bitwise reruns, replay from a captured CUDA graph, and fused = true against the
// unfused chain (the same selections, in another order: max_logits bit for bit, lse to f32
// rounding, out within SPEC 6's bound, since the e4m3 rounding of P depends on which keys share
// a tile).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/gpu_test.h"
#include "tools/metrics.h"
#include "tools/mla_device_outputs.h"
#include "tools/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/pipeline.h"
#include "indexer/reference_cpu.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

using tools::DeviceBuffer;

constexpr int kIndexHeads = 64;
constexpr int kIndexDim = 128;
constexpr int kHeads = 64;
constexpr int kDqk = 576;
constexpr int kDv = 512;
constexpr int kTopk = 128;

// A ragged batch of two causal sequences over cached prefixes, on the host and on the device.
struct Problem {
  int64_t t = 0, n = 0;
  std::vector<int32_t> ks, ke;
  std::vector<uint8_t> index_q, index_k, q, kv;
  std::vector<float> w, k_scale;

  DeviceBuffer<int32_t> d_ks, d_ke;
  DeviceBuffer<uint8_t> d_index_q, d_index_k, d_q, d_kv;
  DeviceBuffer<float> d_w, d_k_scale;

  explicit Problem(uint64_t seed) {
    const SequenceLayout seqs[] = {{40, 300}, {24, 600}};
    ks.resize(64);
    ke.resize(64);
    EXPECT_TRUE(build_causal_bounds(seqs, ks.data(), ke.data(), &t, &n).is_ok());
    index_q = tools::random_e4m3(t * kIndexHeads * kIndexDim, seed + 1, -2.0f, 2.0f);
    index_k = tools::random_e4m3(n * kIndexDim, seed + 2, -2.0f, 2.0f);
    w = tools::random_f32(t * kIndexHeads, seed + 3, -1.0f, 1.0f);
    k_scale = tools::random_f32(n, seed + 4, 0.5f, 1.5f);
    q = tools::random_e4m3(t * kHeads * kDqk, seed + 5, -1.0f, 1.0f);
    kv = tools::random_e4m3(n * kDqk, seed + 6, -1.0f, 1.0f);
    d_ks = DeviceBuffer<int32_t>(ks);
    d_ke = DeviceBuffer<int32_t>(ke);
    d_index_q = DeviceBuffer<uint8_t>(index_q);
    d_index_k = DeviceBuffer<uint8_t>(index_k);
    d_q = DeviceBuffer<uint8_t>(q);
    d_kv = DeviceBuffer<uint8_t>(kv);
    d_w = DeviceBuffer<float>(w);
    d_k_scale = DeviceBuffer<float>(k_scale);
  }

  // Params over the device copies (host == false) or the host copies.
  PrefillParams params(bool host, void* out, float* lse, float* max_logits) const {
    PrefillParams p;
    IndexerParams& ix = p.indexer;
    ix.num_tokens = t;
    ix.num_keys = n;
    ix.num_heads = kIndexHeads;
    ix.head_dim = kIndexDim;
    ix.q = host ? static_cast<const void*>(index_q.data()) : d_index_q.get();
    ix.w = host ? w.data() : d_w.get();
    ix.k = host ? static_cast<const void*>(index_k.data()) : d_index_k.get();
    ix.k_scale = host ? k_scale.data() : d_k_scale.get();
    ix.ks = host ? ks.data() : d_ks.get();
    ix.ke = host ? ke.data() : d_ke.get();
    SparseMlaParams& at = p.attention;
    at.num_tokens = t;
    at.num_kv = n;
    at.num_heads = kHeads;
    at.q = host ? static_cast<const void*>(q.data()) : d_q.get();
    at.kv = host ? static_cast<const void*>(kv.data()) : d_kv.get();
    at.sm_scale = 1.0f / std::sqrt(192.0f);
    at.out = out;
    at.lse = lse;
    at.max_logits = max_logits;
    p.topk = kTopk;
    return p;
  }
};

// The chain's outputs for t tokens (tools::MlaDeviceOutputs; throws on allocation failure).
tools::MlaDeviceOutputs outputs(int64_t t) {
  tools::MlaDeviceOutputs o;
  tools::throw_if_error(o.allocate(t, kHeads));
  return o;
}

// The chain against the CPU references stage by stage. The indexer's f32 logits and the f64
// reference differ in the last bits, which can swap keys at the top-k boundary, so the selection is
// taken on the GPU's own logits (as the chain's top-k sees them): logits vs the f64 reference,
// then the CPU top-k of those logits, then the f64 sparse MLA reference on that selection vs the
// chain's output.
TEST(PrefillGpu, MatchesCpuReferencesStageByStage) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pb(7);
  tools::MlaDeviceOutputs got = outputs(pb.t);
  PrefillParams p = pb.params(false, got.out.get(), got.lse.get(), got.max_logits.get());
  DeviceBuffer<uint8_t> workspace(prefill_workspace_bytes(p));
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.size();
  FP8DSA_ASSERT_STATUS_OK(prefill(p));

  DeviceBuffer<float> d_logits(pb.t * pb.n);
  IndexerParams ix = p.indexer;
  ix.logits = d_logits.get();
  ix.logits_stride = pb.n;
  FP8DSA_ASSERT_STATUS_OK(indexer_logits(ix));
  FP8DSA_ASSERT_CUDA(cudaDeviceSynchronize());
  const std::vector<float> logits = d_logits.download();

  const PrefillParams host = pb.params(true, nullptr, nullptr, nullptr);
  std::vector<double> ref_logits;
  FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(host.indexer, &ref_logits));
  const tools::IndexerCheck ic = tools::check_indexer_logits(logits.data(), pb.n, ref_logits.data(), pb.t,
                                                                 pb.n, pb.ks.data(), pb.ke.data());
  EXPECT_TRUE(ic.passed) << ic.description;

  std::vector<int32_t> indices(pb.t * kTopk);
  TopkParams tk;
  tk.num_rows = pb.t;
  tk.num_keys = pb.n;
  tk.logits = logits.data();
  tk.ks = pb.ks.data();
  tk.ke = pb.ke.data();
  tk.k = kTopk;
  tk.indices = indices.data();
  FP8DSA_ASSERT_STATUS_OK(reference::topk_cpu(tk));

  SparseMlaParams at = host.attention;
  at.indices = indices.data();
  at.topk = kTopk;
  std::vector<double> ref_out, ref_lse, ref_max;
  FP8DSA_ASSERT_STATUS_OK(reference::sparse_mla_cpu_f64(at, &ref_out, &ref_lse, &ref_max));
  const std::vector<uint16_t> out = got.out.download();
  const std::vector<float> lse = got.lse.download(), max_logits = got.max_logits.download();
  const tools::SparseMlaCheck check = tools::check_sparse_mla(
      {out.data(), 0, 0, lse.data(), max_logits.data()}, ref_out, ref_lse, ref_max, pb.t, kHeads, kDv);
  EXPECT_TRUE(check.passed) << check.description;
}

TEST(PrefillGpu, MatchesStagesRunOneByOneAndReruns) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pb(11);
  tools::MlaDeviceOutputs whole = outputs(pb.t), staged = outputs(pb.t);
  PrefillParams p = pb.params(false, whole.out.get(), whole.lse.get(), whole.max_logits.get());
  DeviceBuffer<uint8_t> workspace(prefill_workspace_bytes(p));
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.size();
  EXPECT_TRUE(testing::reruns_bitwise_equal(
      [&] { return prefill(p); },
      {testing::rerun_output(whole.out, "out"), testing::rerun_output(whole.lse, "lse"),
       testing::rerun_output(whole.max_logits, "max_logits")}));

  const int64_t logits_stride = min_logits_stride(pb.n);
  DeviceBuffer<float> logits(pb.t * logits_stride);
  DeviceBuffer<int32_t> indices(pb.t * kTopk);
  IndexerParams ix = p.indexer;
  ix.logits = logits.get();
  ix.logits_stride = logits_stride;
  FP8DSA_ASSERT_STATUS_OK(indexer_logits(ix));
  TopkParams tk;
  tk.num_rows = pb.t;
  tk.num_keys = pb.n;
  tk.logits = logits.get();
  tk.logits_stride = logits_stride;
  tk.ks = pb.d_ks.get();
  tk.ke = pb.d_ke.get();
  tk.k = kTopk;
  tk.indices = indices.get();
  DeviceBuffer<uint8_t> topk_ws(topk_workspace_bytes(tk));
  tk.workspace = topk_ws.get();
  tk.workspace_bytes = topk_ws.size();
  FP8DSA_ASSERT_STATUS_OK(topk(tk));
  SparseMlaParams at = p.attention;
  at.indices = indices.get();
  at.topk = kTopk;
  at.out = staged.out.get();
  at.lse = staged.lse.get();
  at.max_logits = staged.max_logits.get();
  FP8DSA_ASSERT_STATUS_OK(sparse_mla_prefill(at));
  EXPECT_EQ(whole.out.download(), staged.out.download());
  EXPECT_EQ(whole.lse.download(), staged.lse.download());
  EXPECT_EQ(whole.max_logits.download(), staged.max_logits.download());
}

TEST(PrefillGpu, ReplaysFromACapturedGraph) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pb(13);
  tools::MlaDeviceOutputs direct = outputs(pb.t), graphed = outputs(pb.t);
  PrefillParams p = pb.params(false, direct.out.get(), direct.lse.get(), direct.max_logits.get());
  DeviceBuffer<uint8_t> workspace(prefill_workspace_bytes(p));
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.size();
  FP8DSA_ASSERT_STATUS_OK(prefill(p));
  FP8DSA_ASSERT_CUDA(cudaDeviceSynchronize());

  cudaStream_t stream;
  FP8DSA_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  PrefillParams g = pb.params(false, graphed.out.get(), graphed.lse.get(), graphed.max_logits.get());
  g.workspace = workspace.get();
  g.workspace_bytes = workspace.size();
  g.stream = stream;
  cudaGraph_t graph;
  FP8DSA_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status captured = prefill(g);
  FP8DSA_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  FP8DSA_ASSERT_STATUS_OK(captured);
  cudaGraphExec_t exec;
  FP8DSA_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) FP8DSA_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
  FP8DSA_ASSERT_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(direct.out.download(), graphed.out.download());
  EXPECT_EQ(direct.lse.download(), graphed.lse.download());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(PrefillGpu, FusedEqualsUnfused) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pb(17);
  tools::MlaDeviceOutputs unfused = outputs(pb.t), fused = outputs(pb.t);
  PrefillParams p = pb.params(false, unfused.out.get(), unfused.lse.get(), unfused.max_logits.get());
  DeviceBuffer<uint8_t> workspace(prefill_workspace_bytes(p));
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.size();
  FP8DSA_ASSERT_STATUS_OK(prefill(p));
  PrefillParams f = pb.params(false, fused.out.get(), fused.lse.get(), fused.max_logits.get());
  f.fused = true;
  EXPECT_LT(prefill_workspace_bytes(f), prefill_workspace_bytes(p) + (size_t{64} << 20));
  DeviceBuffer<uint8_t> fused_workspace(prefill_workspace_bytes(f));
  f.workspace = fused_workspace.get();
  f.workspace_bytes = fused_workspace.size();
  EXPECT_TRUE(testing::reruns_bitwise_equal(
      [&] { return prefill(f); },
      {testing::rerun_output(fused.out, "out"), testing::rerun_output(fused.lse, "lse"),
       testing::rerun_output(fused.max_logits, "max_logits")}));
  EXPECT_EQ(unfused.max_logits.download(), fused.max_logits.download());
  const std::vector<float> lse_a = unfused.lse.download(), lse_b = fused.lse.download();
  double lse_err = 0.0;
  for (size_t i = 0; i < lse_a.size(); ++i) lse_err = std::max(lse_err, std::abs(double{lse_a[i]} - lse_b[i]));
  EXPECT_LT(lse_err, 1e-4);
  const std::vector<uint16_t> out_a = unfused.out.download(), out_b = fused.out.download();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < out_a.size(); ++i) {
    const double a = bf16_to_float(out_a[i]), b = bf16_to_float(out_b[i]);
    num += (a - b) * (a - b);
    den += a * a;
  }
  EXPECT_LT(std::sqrt(num / den), 2.5e-2);
}

// The unfused selection in token chunks (24, 24 and 16 of the 64 tokens: one [24, N] logits buffer)
// against the whole batch at once, both on the Q-resident scorer: the same logits, so the same
// index sets; the chunks' top-k may order a row's keys differently, which moves only the rounding of
// out and lse.
TEST(PrefillGpu, ChunkedSelectionEqualsWholeBatch) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pb(23);
  ASSERT_GT(pb.t, 48);
  tools::MlaDeviceOutputs whole = outputs(pb.t), chunked = outputs(pb.t);
  PrefillParams p = pb.params(false, whole.out.get(), whole.lse.get(), whole.max_logits.get());
  p.indexer.kernel = IndexerKernel::kQResident;
  DeviceBuffer<uint8_t> workspace(prefill_workspace_bytes(p));
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.size();
  FP8DSA_ASSERT_STATUS_OK(prefill(p));
  PrefillParams c = pb.params(false, chunked.out.get(), chunked.lse.get(), chunked.max_logits.get());
  c.indexer.kernel = IndexerKernel::kQResident;
  c.selection_chunk_tokens = 24;
  ASSERT_LT(prefill_workspace_bytes(c), prefill_workspace_bytes(p));
  DeviceBuffer<uint8_t> chunk_workspace(prefill_workspace_bytes(c));
  c.workspace = chunk_workspace.get();
  c.workspace_bytes = chunk_workspace.size();
  EXPECT_TRUE(testing::reruns_bitwise_equal(
      [&] { return prefill(c); },
      {testing::rerun_output(chunked.out, "out"), testing::rerun_output(chunked.lse, "lse"),
       testing::rerun_output(chunked.max_logits, "max_logits")}));
  EXPECT_EQ(whole.max_logits.download(), chunked.max_logits.download());
  const std::vector<float> lse_a = whole.lse.download(), lse_b = chunked.lse.download();
  double lse_err = 0.0;
  for (size_t i = 0; i < lse_a.size(); ++i) lse_err = std::max(lse_err, std::abs(double{lse_a[i]} - lse_b[i]));
  EXPECT_LT(lse_err, 1e-4);
  const std::vector<uint16_t> out_a = whole.out.download(), out_b = chunked.out.download();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < out_a.size(); ++i) {
    const double a = bf16_to_float(out_a[i]), b = bf16_to_float(out_b[i]);
    num += (a - b) * (a - b);
    den += a * a;
  }
  EXPECT_LT(std::sqrt(num / den), 1e-2);
}

}  // namespace
}  // namespace fp8dsa
