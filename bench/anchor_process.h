// Running an anchor executable (../shared/anchors) from the benchmark: its output and exit status,
// the folder its files go to, and the end of its output for a message.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "fp8dsa/status.h"

namespace fp8dsa::bench {

// Runs `cmd` through the shell and returns what it printed on stdout; *rc gets its exit status (-1
// when it could not be started).
std::string run_command(const std::string& cmd, int* rc);

// mkdir -p dir.
Status make_directory(const std::string& dir);

// The last n characters of s ("..." in front when cut), for an error message.
std::string output_tail(const std::string& s, size_t n);

// The times an anchor printed: every "kernel=<name> kernel_ms_median <ms>" line, and every plain
// "kernel_ms_median <ms>" line (name empty), in order.
struct KernelTime {
  std::string name;
  double ms;
};
std::vector<KernelTime> kernel_times(const std::string& output);

// An anchor's input and output files: raw little-endian arrays. read_file fills *v (sized by the
// caller) and fails unless the file holds exactly that many elements.
template <typename T>
bool write_file(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  return static_cast<bool>(f);
}
template <typename T>
bool read_file(const std::string& path, std::vector<T>* v) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f || static_cast<size_t>(f.tellg()) != v->size() * sizeof(T)) return false;
  f.seekg(0);
  return static_cast<bool>(f.read(reinterpret_cast<char*>(v->data()), static_cast<std::streamsize>(v->size() * sizeof(T))));
}

}  // namespace fp8dsa::bench
