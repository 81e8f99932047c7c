// DeepSeek-V3.2's 656-byte FP8 cache row (KvFormat::kDeepSeekV32, fp8dsa/sparse_mla.h) on the host:
// the quantiser an engine runs when it appends to the cache, its inverse, and the realistic sparse
// MLA inputs of tools/mla_workload.h turned into that format.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8dsa/sparse_mla.h"
#include "tools/mla_workload.h"

namespace fp8dsa::tools {

// values576 (512 nope then 64 rope) -> row656. Nope block b (columns [128b, 128b + 128)) gets
// scale_b = amax_b / 448 and e4m3 = RNE-saturating(value / scale_b); a block whose amax is 0 (or
// whose scale underflows f32) gets scale 0 and zero bytes. The rope is stored as bf16 (RNE).
void quantize_v32_row(const float* values576, uint8_t* row656);

// row656 -> values576: e4m3 * scale of its block (rounded to f32), bf16 rope.
void dequantize_v32_row(const uint8_t* row656, float* values576);

struct V32Workload {
  std::vector<uint16_t> q_bf16;           // [T, h, 576] bf16 bits, packed (h = the workload's heads)
  std::vector<uint8_t> kv;                // [N, 656] rows, packed
  // [N, 576] bf16 of each row's dequantised values (bf16 rounding of e4m3 * scale; the rope as
  // stored): what an engine feeds a BF16 kernel (FlashMLA) after dequantising the cache.
  std::vector<uint16_t> kv_dequant_bf16;
  // From a workload that keeps every token's unrounded values (unrounded_every == 1): the values
  // before their rounding to bf16 q and to the V3.2 rows (SPEC 6's R0), q [T, h, 576] and kv
  // [N, 576] f32. Empty otherwise.
  std::vector<float> q_unrounded, kv_unrounded;
};

// The V3.2-format form of w: kv row n holds w's e4m3 values with nope block b multiplied by a
// per-(row, block) lognormal factor exp(block_sigma * N(0, 1)) and the rope by one more such
// factor per row, then quantize_v32_row; q holds w's q values times (1 + 0.01 N(0, 1)) per element,
// as bf16 (so q is not e4m3-exact). Indices are w's. The draws depend on (seed, row, column) only.
// Where w keeps every token's unrounded values (spec.unrounded_every == 1), those take the place of
// its e4m3 values, and the result keeps its own unrounded values too.
V32Workload make_v32_workload(const MlaWorkload& w, uint64_t seed, double block_sigma = 0.5);

// As mla_params(w, h), over v's inputs: kv_format kDeepSeekV32, bf16 q, 656-byte rows.
SparseMlaParams v32_mla_params(const MlaWorkload& w, const V32Workload& v, int h);

}  // namespace fp8dsa::tools
