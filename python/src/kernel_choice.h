// The `kernel=` and `kv_format=` arguments: a name as the library spells it (sparse_mla_kernel_name,
// indexer_kernel_name, kv_format_name) -> the enum value.
#pragma once

#include <initializer_list>
#include <string>

#include "array_checks.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::python {

// `argument` names the argument in the message ("kernel 'fast' must be one of 'auto', ...").
template <typename Choice>
Choice choice_from_name(const ArrayChecker& arrays, const char* argument, const std::string& name,
                        std::initializer_list<Choice> choices, const char* (*choice_name)(Choice)) {
  std::string known;
  for (Choice choice : choices) {
    if (name == choice_name(choice)) return choice;
    known += known.empty() ? "" : ", ";
    known += std::string("'") + choice_name(choice) + "'";
  }
  arrays.fail(std::string(argument) + " '" + name + "' must be one of " + known);
}

// Every kernel a caller may name, for indexer_logits / prefill and sparse_mla_prefill / prefill.
inline IndexerKernel indexer_kernel_from_name(const ArrayChecker& arrays, const std::string& name) {
  return choice_from_name(arrays, "kernel", name,
                          {IndexerKernel::kAuto, IndexerKernel::kQResident, IndexerKernel::kKResident,
                           IndexerKernel::kReference},
                          indexer_kernel_name);
}
inline SparseMlaKernel sparse_mla_kernel_from_name(const ArrayChecker& arrays, const std::string& name) {
  return choice_from_name(arrays, "kernel", name,
                          {SparseMlaKernel::kAuto, SparseMlaKernel::kFp8, SparseMlaKernel::kReference},
                          sparse_mla_kernel_name);
}
inline KvFormat kv_format_from_name(const ArrayChecker& arrays, const std::string& name) {
  return choice_from_name(arrays, "kv_format", name, {KvFormat::kE4m3, KvFormat::kDeepSeekV32}, kv_format_name);
}

}  // namespace fp8dsa::python
