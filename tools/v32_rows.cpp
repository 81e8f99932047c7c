#include "tools/v32_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/parallel_for.h"
#include "fp8dsa/fp8.h"
#include "tools/counter_draws.h"

namespace fp8dsa::tools {
namespace {

constexpr int kDqk = 576;
constexpr int kNope = kV32ScaleOffset;  // one e4m3 byte per nope column, then the scales
constexpr int kBlocks = kNope / kV32ScaleBlock;
constexpr float kE4m3Max = 448.0f;

// Streams of counter_draws.h, apart from mla_workload.cpp's.
enum Stream : uint64_t { kBlockFactor = 16, kRopeFactor, kQueryPerturbation };

}  // namespace

void quantize_v32_row(const float* values, uint8_t* row) {
  for (int b = 0; b < kBlocks; ++b) {
    const float* block = values + b * kV32ScaleBlock;
    float amax = 0.0f;
    for (int c = 0; c < kV32ScaleBlock; ++c) amax = std::max(amax, std::abs(block[c]));
    float scale = amax / kE4m3Max;
    if (!(scale > 0.0f)) scale = 0.0f;  // a zero block (or an amax whose scale underflows)
    for (int c = 0; c < kV32ScaleBlock; ++c) {
      row[b * kV32ScaleBlock + c] = scale > 0.0f ? float_to_e4m3(block[c] / scale) : uint8_t{0};
    }
    std::memcpy(row + kV32ScaleOffset + b * sizeof(float), &scale, sizeof(float));
  }
  for (int c = kNope; c < kDqk; ++c) {
    const uint16_t bits = float_to_bf16(values[c]);
    std::memcpy(row + kV32RopeOffset + 2 * (c - kNope), &bits, sizeof(bits));
  }
}

void dequantize_v32_row(const uint8_t* row, float* values) {
  float scales[kBlocks];
  std::memcpy(scales, row + kV32ScaleOffset, sizeof(scales));
  for (int c = 0; c < kNope; ++c) values[c] = e4m3_to_float(row[c]) * scales[c / kV32ScaleBlock];
  for (int c = kNope; c < kDqk; ++c) {
    uint16_t bits;
    std::memcpy(&bits, row + kV32RopeOffset + 2 * (c - kNope), sizeof(bits));
    values[c] = bf16_to_float(bits);
  }
}

V32Workload make_v32_workload(const MlaWorkload& w, uint64_t seed, double block_sigma) {
  const MlaWorkloadSpec& s = w.spec;
  const bool continuous = s.unrounded_every == 1 && !w.kv_unrounded.empty();
  V32Workload v;
  v.kv.resize(static_cast<size_t>(s.num_kv) * kV32RowBytes);
  if (continuous) {
    v.kv_unrounded.resize(w.kv_unrounded.size());
    v.q_unrounded.resize(w.q_unrounded.size());
  }
  v.kv_dequant_bf16.resize(static_cast<size_t>(s.num_kv) * kDqk);
  const auto lognormal = [&](uint64_t stream, int64_t index) {
    return static_cast<float>(std::exp(block_sigma * normal(seed, stream, static_cast<uint64_t>(index))));
  };
  parallel_for(0, s.num_kv, [&](int64_t n) {
    float factors[kBlocks + 1];  // one per nope block, then the rope's
    for (int b = 0; b < kBlocks; ++b) factors[b] = lognormal(kBlockFactor, n * kBlocks + b);
    factors[kBlocks] = lognormal(kRopeFactor, n);
    float values[kDqk];
    for (int c = 0; c < kDqk; ++c) {
      const int block = std::min(c / kV32ScaleBlock, kBlocks);  // the rope's factor past the nope
      const size_t i = static_cast<size_t>(n * kDqk + c);
      values[c] = (continuous ? w.kv_unrounded[i] : e4m3_to_float(w.kv[i])) * factors[block];
      if (continuous) v.kv_unrounded[i] = values[c];
    }
    uint8_t* row = v.kv.data() + n * kV32RowBytes;
    quantize_v32_row(values, row);
    dequantize_v32_row(row, values);
    for (int c = 0; c < kDqk; ++c) v.kv_dequant_bf16[static_cast<size_t>(n * kDqk + c)] = float_to_bf16(values[c]);
  });
  v.q_bf16.resize(w.q.size());
  parallel_for(0, static_cast<int64_t>(w.q.size()), [&](int64_t i) {
    const float perturbation = 1.0f + 0.01f * normal(seed, kQueryPerturbation, static_cast<uint64_t>(i));
    const size_t j = static_cast<size_t>(i);
    const float value = (continuous ? w.q_unrounded[j] : e4m3_to_float(w.q[j])) * perturbation;
    v.q_bf16[j] = float_to_bf16(value);
    if (continuous) v.q_unrounded[j] = value;
  });
  return v;
}

SparseMlaParams v32_mla_params(const MlaWorkload& w, const V32Workload& v, int h) {
  if (v.q_bf16.size() != w.q.size() || v.kv.size() != w.kv.size() / kDqk * kV32RowBytes) {
    throw std::invalid_argument("v32_mla_params: v is not the V3.2 form of w");
  }
  SparseMlaParams p = mla_params(w, h);
  p.kv_format = KvFormat::kDeepSeekV32;
  p.q = v.q_bf16.data();
  p.q_dtype = DType::kBF16;
  p.kv = v.kv.data();
  return p;
}

}  // namespace fp8dsa::tools
