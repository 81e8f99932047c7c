// Running an anchor executable (../shared/anchors) from the benchmark: its output and exit status,
// the folder its files go to, and the end of its output for a message.
#pragma once

#include <cstddef>
#include <string>

#include "fp8dsa/status.h"

namespace fp8dsa::bench {

// Runs `cmd` through the shell and returns what it printed on stdout; *rc gets its exit status (-1
// when it could not be started).
std::string run_command(const std::string& cmd, int* rc);

// mkdir -p dir.
Status make_directory(const std::string& dir);

// The last n characters of s ("..." in front when cut), for an error message.
std::string output_tail(const std::string& s, size_t n);

}  // namespace fp8dsa::bench
