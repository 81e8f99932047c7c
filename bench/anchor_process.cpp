#include "anchor_process.h"

#include <cstdio>
#include <cstdlib>

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

}  // namespace fp8dsa::bench
