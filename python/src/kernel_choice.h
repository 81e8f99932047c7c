// The `kernel=` argument: a name as the library spells it (sparse_mla_kernel_name,
// indexer_kernel_name) -> the enum value.
#pragma once

#include <initializer_list>
#include <string>

#include "array_checks.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::python {

template <typename Kernel>
Kernel kernel_from_name(const ArrayChecker& arrays, const std::string& name,
                        std::initializer_list<Kernel> kernels, const char* (*kernel_name)(Kernel)) {
  std::string known;
  for (Kernel kernel : kernels) {
    if (name == kernel_name(kernel)) return kernel;
    known += known.empty() ? "" : ", ";
    known += std::string("'") + kernel_name(kernel) + "'";
  }
  arrays.fail("kernel '" + name + "' must be one of " + known);
}

// Every kernel a caller may name, for indexer_logits / prefill and sparse_mla_prefill / prefill.
inline IndexerKernel indexer_kernel_from_name(const ArrayChecker& arrays, const std::string& name) {
  return kernel_from_name(arrays, name,
                          {IndexerKernel::kAuto, IndexerKernel::kQResident, IndexerKernel::kKResident,
                           IndexerKernel::kReference},
                          indexer_kernel_name);
}
inline SparseMlaKernel sparse_mla_kernel_from_name(const ArrayChecker& arrays, const std::string& name) {
  return kernel_from_name(arrays, name,
                          {SparseMlaKernel::kAuto, SparseMlaKernel::kFp8, SparseMlaKernel::kReference},
                          sparse_mla_kernel_name);
}

}  // namespace fp8dsa::python
