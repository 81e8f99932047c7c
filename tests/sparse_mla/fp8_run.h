// The native FP8 sparse MLA GPU tests' runner, shared by the 576-byte-row tests
// (sparse_mla_gpu_test.cu) and the DeepSeek-V3.2-row tests (v32_gpu_test.cu): a problem through the
// kernel on poisoned outputs with bitwise reruns and coverage checks, then SPEC 6 against the f64
// references (against the rounding of the inputs where the problem keeps its unrounded values).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fp8dsa/status.h"
#include "mla_problem.h"
#include "sparse_mla/launch.h"
#include "tools/sampled_mla_reference.h"

namespace fp8dsa::mla_test {

// Runs `launch` (default: sparse_mla_prefill of the problem) twice on poisoned outputs (bitwise
// equal), checks coverage and returns the outputs.
void run_and_check_coverage(MlaProblem& pr, std::vector<uint16_t>* out, std::vector<float>* lse,
                            std::vector<float>* max_logits, std::function<Status()> launch = nullptr);

// The f64 references of pr's tokens t % every == 0: on its inputs (Rq) and, where the problem keeps
// them, on its values before rounding (R0).
Status build_reference(const MlaProblem& pr, int64_t every, tools::SampledMlaReference* ref);

struct AccuracyVerdict {
  bool passed = false;
  std::string description;
};

// SPEC 6 for one run: against the rounding of the inputs where the problem keeps its unrounded
// values (the realistic e4m3 inputs), else the absolute bound (DeepSeek-V3.2 rows: its scores by a
// wider factor, see the .cu). Prints the numbers.
AccuracyVerdict judge_accuracy(const MlaCase& c, const MlaProblem& pr, const tools::SampledMlaReference& ref,
                               const std::vector<uint16_t>& out, const std::vector<float>& lse,
                               const std::vector<float>& max_logits, const std::string& label);

// One case through sparse_mla_prefill, every token against the f64 reference.
void run_case(const MlaCase& c, uint64_t seed);

// One problem through launch_sparse_mla_fp8 with each tuning and each q term count of q_terms (empty:
// the case's own) (poisoned outputs, bitwise rerun, every element written), every `every`-th token
// against the f64 reference (computed once) under SPEC 6 (meets_accuracy), required of the tunings
// with the default chain count and printed for all.
void run_large(const MlaCase& c, uint64_t seed, int64_t every,
               const std::vector<detail::sparse_mla::Fp8Tuning>& tunings = {{}}, const std::vector<int>& q_terms = {});

}  // namespace fp8dsa::mla_test
