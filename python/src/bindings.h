// The extension's functions, one registration per stage (module.cpp calls them all). Each stage
// has a GPU call, which runs on the CUDA stream it is given, and a *_cpu call into the library's
// CPU reference; the Python layer (python/fp8dsa) allocates their outputs and workspaces.
#pragma once

#include <nanobind/nanobind.h>

namespace fp8dsa::python {

void bind_conversions(nanobind::module_& m);
void bind_indexer(nanobind::module_& m);
void bind_topk(nanobind::module_& m);
void bind_fused_topk(nanobind::module_& m);
void bind_sparse_mla(nanobind::module_& m);
void bind_prefill(nanobind::module_& m);
void bind_lse_merge(nanobind::module_& m);

}  // namespace fp8dsa::python
