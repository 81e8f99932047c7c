// The outputs of one sparse MLA (or prefill) run on the device, as the benchmark, the CLI and the
// GPU tests hold them: out [T, h, 512] bf16 and lse, max_logits [T, h] f32, packed.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/status.h"
#include "tools/device_buffer.h"

namespace fp8dsa::tools {

struct MlaDeviceOutputs {
  static constexpr int kDv = 512;
  DeviceBuffer<uint16_t> out;
  DeviceBuffer<float> lse, max_logits;
  int num_heads = 0;

  Status allocate(int64_t num_tokens, int heads);
  // p's out, lse and max_logits (packed strides left to SparseMlaParams' defaults).
  void attach(SparseMlaParams* p) const;
  // Waits for the device, then copies all three to the host.
  Status download(std::vector<uint16_t>* host_out, std::vector<float>* host_lse,
                  std::vector<float>* host_max_logits) const;
  // Waits for the device, then copies the rows of the listed tokens only, in that order.
  Status download_tokens(const std::vector<int64_t>& tokens, std::vector<uint16_t>* host_out,
                         std::vector<float>* host_lse, std::vector<float>* host_max_logits) const;
};

}  // namespace fp8dsa::tools
