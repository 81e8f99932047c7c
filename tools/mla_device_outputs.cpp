#include "tools/mla_device_outputs.h"

#include <string>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"

namespace fp8dsa::tools {

namespace {

// Rows `tokens` of a [T, row_elems] device array into *host, one after the other.
template <typename T>
Status copy_rows(const T* device, size_t row_elems, size_t num_rows, const std::vector<int64_t>& tokens,
                 std::vector<T>* host) {
  host->resize(tokens.size() * row_elems);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= num_rows) {
      return invalid_argument("MlaDeviceOutputs: token " + std::to_string(tokens[i]) + " outside [0, " +
                              std::to_string(num_rows) + ")");
    }
    FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemcpy(host->data() + i * row_elems, device + tokens[i] * row_elems,
                                           row_elems * sizeof(T), cudaMemcpyDeviceToHost));
  }
  return Status::ok();
}

}  // namespace

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
  const size_t num_rows = heads == 0 ? 0 : lse.size() / heads;
  FP8DSA_RETURN_IF_ERROR(copy_rows(out.get(), heads * kDv, num_rows, tokens, host_out));
  FP8DSA_RETURN_IF_ERROR(copy_rows(lse.get(), heads, num_rows, tokens, host_lse));
  return copy_rows(max_logits.get(), heads, num_rows, tokens, host_max_logits);
}

}  // namespace fp8dsa::tools
