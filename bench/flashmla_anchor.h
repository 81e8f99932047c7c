// The FlashMLA anchor (../shared/anchors: FlashMLA's SM90 BF16 sparse prefill) run through its `io`
// mode on our inputs: the inputs go to files in ctx.anchor_dir, the anchor times its kernel (median
// of its iterations) and writes its outputs, read back here for the accuracy comparison.
#pragma once

#include <cstdint>
#include <vector>

#include <string>

#include "fp8dsa/status.h"
#include "tools/sampled_mla_reference.h"
#include "op_benches.h"

namespace fp8dsa::bench {

struct FlashMlaInputs {
  int64_t num_tokens, num_kv;
  int num_heads, topk;
  float sm_scale;
  const std::vector<uint16_t>* q;        // [T, h, 576] bf16, packed
  const std::vector<uint16_t>* kv;       // [N, 576] bf16, packed
  const std::vector<int32_t>* indices;   // [T, topk]
};

Status run_flashmla_io(const BenchContext& ctx, const FlashMlaInputs& in, double* ms, std::vector<uint16_t>* out,
                       std::vector<float>* lse, std::vector<float>* max_logits);

// One kernel's accuracy line against the sampled f64 reference, as the sparse MLA benches print it.
void print_mla_accuracy(const char* who, const std::string& shape, const tools::SparseMlaCheck& c);

}  // namespace fp8dsa::bench
