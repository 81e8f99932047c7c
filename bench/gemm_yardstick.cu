#include "gemm_yardstick.h"

#include <cstdint>
#include <string>
#include <vector>

#include <cublasLt.h>

#include "tools/device_random.h"

namespace fp8dsa::bench {
namespace {

// 32 MiB is what cuBLASLt's own Hopper heuristics ask for at this size.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

Status cublas_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return {StatusCode::kCudaError,
          std::string(what) + ": " + cublasLtGetStatusName(status) + " (" + cublasLtGetStatusString(status) + ")"};
}

#define FP8DSA_CUBLAS_RETURN_IF_ERROR(expr) FP8DSA_RETURN_IF_ERROR(cublas_status((expr), #expr))

// The cuBLASLt objects of one matmul; destroyed on every exit path.
struct LtHandles {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtHandles() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
  }
};

}  // namespace

Status run_fp8_gemm_yardstick(int m, int n, int k, const tools::TimingConfig& config, size_t l2_bytes,
                              cudaStream_t stream, GemmYardstick* out) {
  // cuBLASLt is column-major. Row-major D[m, n] = A[m, k] B[k, n] is column-major
  // D^T[n, m] = B^T A^T; FP8 requires the TN form (first operand transposed, both operands
  // K-major), so the first operand is a k x n column-major matrix (transposed), the second k x m.
  const size_t a_bytes = static_cast<size_t>(m) * k;
  const size_t b_bytes = static_cast<size_t>(k) * n;
  const size_t d_bytes = static_cast<size_t>(m) * n * 2;
  const int sets = tools::rotation_sets(a_bytes + b_bytes, l2_bytes, 4);

  std::vector<tools::DeviceBytes> a(static_cast<size_t>(sets)), b(static_cast<size_t>(sets));
  for (int s = 0; s < sets; ++s) {
    FP8DSA_RETURN_IF_ERROR(a[s].allocate(a_bytes));
    FP8DSA_RETURN_IF_ERROR(b[s].allocate(b_bytes));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(a[s].get(), a_bytes, 0xA000 + s, 1.0f, stream));
    FP8DSA_RETURN_IF_ERROR(tools::fill_random_e4m3(b[s].get(), b_bytes, 0xB000 + s, 1.0f, stream));
  }
  tools::DeviceBytes d, workspace;
  FP8DSA_RETURN_IF_ERROR(d.allocate(d_bytes));
  FP8DSA_RETURN_IF_ERROR(workspace.allocate(kGemmWorkspaceBytes));

  LtHandles lt;
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&lt.handle));
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  FP8DSA_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  FP8DSA_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
  // Operand 1 = B stored n x k row-major (k-major), seen as k x n column-major, transposed.
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&lt.a, CUDA_R_8F_E4M3, k, n, k));
  // Operand 2 = A stored m x k row-major, seen as k x m column-major.
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&lt.b, CUDA_R_8F_E4M3, k, m, k));
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&lt.d, CUDA_R_16BF, n, m, n));
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&lt.pref));
  const size_t ws_bytes = kGemmWorkspaceBytes;
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  FP8DSA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.op, lt.a, lt.b, lt.d, lt.d,
                                                               lt.pref, 1, &heuristic, &found));
  if (found == 0) {
    return {StatusCode::kCudaError, "cuBLASLt found no FP8 algorithm for " + std::to_string(m) + "x" +
                                        std::to_string(n) + "x" + std::to_string(k)};
  }

  const float alpha = 1.0f, beta = 0.0f;
  auto launch = [&](int s) -> Status {
    // C is D with beta = 0 (cuBLASLt FP8 wants C and D of the same type when C is unused).
    return cublas_status(cublasLtMatmul(lt.handle, lt.op, &alpha, b[s].get(), lt.a, a[s].get(), lt.b, &beta,
                                        d.get(), lt.d, d.get(), lt.d, &heuristic.algo, workspace.get(),
                                        ws_bytes, stream),
                         "cublasLtMatmul (FP8 8192^3 yardstick)");
  };
  FP8DSA_RETURN_IF_ERROR(tools::time_launches(stream, sets, config, launch, &out->timing));

  out->m = m;
  out->n = n;
  out->k = k;
  out->tflops = 2.0 * m * n * static_cast<double>(k) / (out->timing.median_ms * 1e-3) / 1e12;
  out->algo = "cuBLASLt FP8 (e4m3 TN, bf16 out)";
  return Status::ok();
}

}  // namespace fp8dsa::bench
