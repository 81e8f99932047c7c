// What a `fp8dsa run` needs before it allocates anything: host (and device) memory estimated from
// the options, against what is available, so that a run too large for the machine stops with a
// message (exit 2) instead of dying of std::bad_alloc halfway.
#pragma once

#include <string>

#include "fp8dsa/cpu_time.h"
#include "problem.h"

namespace fp8dsa::cli {

// Bytes of host memory the run allocates at its peak (inputs, outputs, the references' working
// memory, the sampled checks), for options with their defaults filled in.
double host_bytes_needed(const RunOptions& options, bool gpu);
// Bytes of device memory the GPU path allocates (inputs, outputs, logits, indices, workspaces).
double device_bytes_needed(const RunOptions& options);

// Host memory this process can still get: the smallest of MemAvailable (/proc/meminfo) and the
// headroom under RLIMIT_AS and RLIMIT_DATA; `source` says which. Negative when none is known.
double host_bytes_available(std::string* source);

// The time the CPU references of a run (options with their defaults) take on this machine's
// reference threads: the indexer over the causal pairs and the sparse MLA over topk keys, each run
// twice (stage by stage and as the whole prefill). Past reference::kMaxCpuSeconds the run is refused.
reference::CpuTimeEstimate cpu_time_estimate(const RunOptions& options);

// "" when the run fits; otherwise the message to print (host first, then device on the GPU path).
std::string check_memory(const RunOptions& options, bool gpu);

// validate_options, then check_memory, and on the CPU path the time estimate on the references'
// threads (cpu_reference_threads(): FP8DSA_CPU_THREADS or the machine's; a value of it that is not a
// positive integer is refused; printed past 30 s, and past reference::kMaxCpuSeconds a refusal): 0 when the run can go ahead, else 2 with the reason printed to stderr.
// Allocates nothing.
int check_runnable(const RunOptions& options, bool gpu);

// "1.5 GB", "312 MB", "2.3 PB".
std::string format_bytes(double bytes);

}  // namespace fp8dsa::cli
