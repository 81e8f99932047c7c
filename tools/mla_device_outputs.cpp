#include "tools/mla_device_outputs.h"

#include <string>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"

namespace fp8dsa::tools {

Status MlaDeviceOutputs::allocate(int64_t num_tokens, int heads) {
  if (num_tokens < 0 || heads <= 0) {
    return invalid_argument("MlaDeviceOutputs: num_tokens " + std::to_string(num_tokens) + ", heads " +
                            std::to_string(heads));
  }
  num_heads = heads;
  const size_t rows = static_cast<size_t>(num_tokens) * static_cast<size_t>(heads);
  FP8DSA_RETURN_IF_ERROR(out.allocate(rows * kDv));
  FP8DSA_RETURN_IF_ERROR(lse.allocate(rows));
  return max_logits.allocate(rows);
}

void MlaDeviceOutputs::attach(SparseMlaParams* p) const {
  p->out = out.get();
  p->lse = lse.get();
  p->max_logits = max_logits.get();
}

Status MlaDeviceOutputs::download(std::vector<uint16_t>* host_out, std::vector<float>* host_lse,
                                  std::vector<float>* host_max_logits) const {
  FP8DSA_RETURN_IF_ERROR(out.download(host_out));
  FP8DSA_RETURN_IF_ERROR(lse.download(host_lse));
  return max_logits.download(host_max_logits);
}

Status MlaDeviceOutputs::download_tokens(const std::vector<int64_t>& tokens, std::vector<uint16_t>* host_out,
                                         std::vector<float>* host_lse, std::vector<float>* host_max_logits) const {
  FP8DSA_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize before download"));
  const size_t heads = static_cast<size_t>(num_heads);
  const int64_t num_tokens = heads == 0 ? 0 : static_cast<int64_t>(lse.size() / heads);
  const int64_t ld = static_cast<int64_t>(heads);
  FP8DSA_RETURN_IF_ERROR(download_rows(out.get(), ld * kDv, heads * kDv, num_tokens, tokens, host_out));
  FP8DSA_RETURN_IF_ERROR(download_rows(lse.get(), ld, heads, num_tokens, tokens, host_lse));
  return download_rows(max_logits.get(), ld, heads, num_tokens, tokens, host_max_logits);
}

}  // namespace fp8dsa::tools
