// The per-operation benchmarks. Each one times the public fast entry point (so it measures whatever
// kernel is current), names the kernel that ran, and adds one row per shape to ctx.results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "results.h"
#include "tools/mla_workload.h"
#include "tools/timing.h"

namespace fp8dsa::bench {

struct BenchContext {
  bool quick = false;  // fewer shapes
  tools::TimingConfig timing;
  size_t l2_bytes = 0;
  cudaStream_t stream = nullptr;
  uint64_t seed = 0x5EED;
  Results* results = nullptr;
  std::string flashmla;    // the FlashMLA anchor executable (empty: not timed)
  std::string q8kv8;       // SGLang's FP8 sparse MLA anchor executable (empty: not timed)
  std::string flashmla_kv;  // FlashMLA's FP8-cache sparse decode as prefill (bench/anchors/flashmla_kv_io.py)
  std::string deepgemm;    // DeepGEMM's indexer anchor executable (empty: not timed)
  std::string sgl_topk;    // SGLang's top-k kernels' anchor executable (empty: not timed)
  std::string torch_topk;  // bench/torch_topk_io.py: torch.topk as a peer (empty: not timed)
  std::vector<std::string> mla_data;  // sparse MLA input sets (empty: the bench's default list)
  std::vector<tools::MlaSelection> mla_selections;  // sparse MLA selections (empty: both)
  std::vector<int64_t> mla_keys;      // sparse MLA cache sizes (empty: the bench's default list)
  std::vector<int> mla_qk_chains;     // FP8DSA_TUNING builds: QK^T chain counts timed besides the default
  std::vector<int> mla_heads;         // sparse MLA head counts (empty: the bench's default list)
  std::string anchor_dir;  // where the anchors' input and output files go
};

// Times launch(set) over `sets` input sets and adds `row` with its median time and what `derive`
// (given the seconds) fills in (TFLOPS, GB/s). A launch refused as unsupported is recorded as such
// and is not an error.
Status time_and_record(const BenchContext& ctx, int sets, const std::function<Status(int set)>& launch,
                       ResultRow row, const std::function<void(double seconds, ResultRow& row)>& derive);

// T=4096 new tokens over N-4096 cached keys (causal), N in {8K, 32K, 64K, 128K}, H in {64, 32}; with
// ctx.deepgemm also on DeepGEMM's dumped inputs, beside DeepGEMM's time for them.
Status run_indexer_bench(const BenchContext& ctx);
// The sparse MLA input sets --mla-data may name ("realistic, peaked, ..."), and whether `name` is one.
std::string mla_data_set_names();
bool is_mla_data_set(const std::string& name);
// --mla-sel's names ("realistic", "uniform"; tools::mla_selection_name); false for any other.
bool parse_mla_selection(const std::string& name, tools::MlaSelection* selection);
// The cache sizes --mla-keys may ask for: at least the bench's 4096 tokens, at most 1M rows.
inline constexpr int64_t kMlaMinKeys = 4096;
inline constexpr int64_t kMlaMaxKeys = int64_t{1} << 20;
// rows x keys in {4096x8192, 4096x32768, 8192x65536, 64x131072, 1x1048576}, k = 2048, beside the
// CUB sort baseline when it is built in; then prefill's causal rows (T = 4096, N in {8K, 32K, 128K},
// iid logits and the indexer's own) beside the engines' top-k kernels given by ctx.sgl_topk and
// ctx.torch_topk, each peer's selection checked against ours (exact).
Status run_topk_bench(const BenchContext& ctx);
// T=4096 causal, k=2048, N in {8K, 32K, 64K, 128K}, H in {64, 32}: fused score + top-k beside the
// unfused path, the indexer alone and the top-k alone, on the same inputs.
Status run_fused_topk_bench(const BenchContext& ctx);
// T=4096, topk=2048, N in {8K, 32K, 64K, 128K}, h in {128, 64, 32, 16} on the realistic inputs; at
// N = 32K also h = 128 and 64 on every other input set (peaked, random of three spreads, zeros), each
// beside the anchors on the same inputs.
Status run_sparse_mla_bench(const BenchContext& ctx);
// The same from DeepSeek-V3.2's 656-byte rows with bf16 q: N in {8K, 32K, 128K}, h in {128, 64, 16},
// beside FlashMLA BF16 on pre-dequantised rows and the dequantisation pass + FlashMLA.
Status run_sparse_mla_v32_bench(const BenchContext& ctx);
// The whole prefill, T=4096 new tokens over a 32K-row cache (N = 32768), h=128, H=64, topk=2048;
// with ctx.deepgemm and ctx.flashmla also the anchors' stages on the same inputs (DeepGEMM's scorer,
// our top-k, FlashMLA), summed.
Status run_pipeline_bench(const BenchContext& ctx);

}  // namespace fp8dsa::bench
