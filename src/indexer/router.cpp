// indexer_route: which scorer kAuto runs for a shape, from the measured grid in
// bench/journal/2026-11-29.md ("the router grid": Q-resident vs K-resident, T in {1 .. 16384} x
// N in {4K, 32K, 128K} x H in {8, 32, 64}, D = 128, H200). The K-resident scorer wins only while
// the token count is small: its grid spreads over N / 64 key tiles whatever T is, while the
// Q-resident grid has too few token blocks and too much fixed cost (Q block load, pipeline fill)
// per key tile there. Past the crossover the Q-resident scorer is 2-4x faster and the gap grows
// with T.
#include <cstdint>

#include "fp8dsa/indexer.h"

namespace fp8dsa {
namespace {

// Largest T for which the K-resident scorer was measured faster, per (head-count row, key bucket).
// Rows: H <= 8 (measured at 8), H in {16, 32} (measured at 32; H = 16 takes the smaller, safer
// threshold of its neighbours' table), H = 64. Buckets: N <= 8K (measured at 4K), N <= 64K
// (measured at 32K), larger (measured at 128K).
constexpr int64_t kKResidentMaxTokens[3][3] = {
    {256, 16, 16},  // H <= 8
    {64, 4, 4},     // H = 16, 32
    {16, 4, 1},     // H = 64
};

}  // namespace

IndexerKernel indexer_route(const IndexerParams& params) {
  const IndexerParams p = params.resolved();
  const int row = p.num_heads <= 8 ? 0 : p.num_heads <= 32 ? 1 : 2;
  const int bucket = p.num_keys <= 8192 ? 0 : p.num_keys <= 65536 ? 1 : 2;
  return p.num_tokens <= kKResidentMaxTokens[row][bucket] ? IndexerKernel::kKResident
                                                          : IndexerKernel::kQResident;
}

}  // namespace fp8dsa
