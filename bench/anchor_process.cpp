#include "anchor_process.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace fp8dsa::bench {

std::string run_command(const std::string& cmd, int* rc) {
  std::string output;
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    *rc = -1;
    return output;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  *rc = pclose(pipe);
  return output;
}

Status make_directory(const std::string& dir) {
  if (std::system(("mkdir -p '" + dir + "'").c_str()) != 0) return invalid_argument("cannot create " + dir);
  return Status::ok();
}

std::string output_tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

std::vector<KernelTime> kernel_times(const std::string& output) {
  std::vector<KernelTime> times;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    char name[64] = {0};
    double ms = NAN;
    if (std::sscanf(line.c_str(), "kernel=%63s kernel_ms_median %lf", name, &ms) == 2 ||
        std::sscanf(line.c_str(), "kernel_ms_median %lf", &ms) == 1) {
      times.push_back({name, ms});
    }
  }
  return times;
}

}  // namespace fp8dsa::bench
