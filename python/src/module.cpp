// fp8dsa._fp8dsa: the library's public calls on DLPack arrays (torch, CuPy, JAX, NumPy), with no
// framework headers: every array crosses as a nanobind ndarray.
#include "bindings.h"
#include "fp8dsa/cpu_time.h"
#include "library_call.h"
#include "stage_params.h"

NB_MODULE(_fp8dsa, m) {
  m.attr("WORKSPACE_ALIGNMENT") = fp8dsa::kWorkspaceAlignment;
  m.attr("MAX_CPU_SECONDS") = fp8dsa::reference::kMaxCpuSeconds;
  m.def("synchronize", &fp8dsa::python::synchronize, nanobind::arg("device_id"), nanobind::arg("stream"));
  fp8dsa::python::bind_conversions(m);
  fp8dsa::python::bind_indexer(m);
  fp8dsa::python::bind_topk(m);
  fp8dsa::python::bind_fused_topk(m);
  fp8dsa::python::bind_sparse_mla(m);
  fp8dsa::python::bind_prefill(m);
  fp8dsa::python::bind_lse_merge(m);
}
